"""Obstacle fields for the planar snake: a regular (staggered) lattice and a seeded random field.

Both respect Assumption 3 of paper 001 (the edges of any two obstacles are farther apart than the link length
2l, so a link can never touch two obstacles or both of its sides at once), which ``check_assumption_3`` verifies.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.planar_snake.model import PlanarSnakeError

__all__ = ["ObstacleField", "check_assumption_3", "lattice_field", "random_field", "remove_overlapping"]


@dataclass(frozen=True)
class ObstacleField:
    centres_m: np.ndarray  # (k, 2)
    radii_m: np.ndarray  # (k,)

    @property
    def count(self) -> int:
        return int(self.radii_m.size)


def edge_distances(centres_m: np.ndarray, radii_m: np.ndarray) -> np.ndarray:
    """Pairwise distances between obstacle edges (k, k); the diagonal is +inf."""
    d = np.linalg.norm(centres_m[:, None, :] - centres_m[None, :, :], axis=-1) - radii_m[:, None] - radii_m[None, :]
    np.fill_diagonal(d, np.inf)
    return d


def check_assumption_3(field: ObstacleField, link_length_m: float) -> float:
    """Smallest edge-to-edge distance; raises if it is not larger than the link length 2l."""
    if field.count < 2:
        return float("inf")
    d = edge_distances(field.centres_m, field.radii_m)
    smallest = float(d.min())
    if smallest <= link_length_m:
        i, j = np.unravel_index(np.argmin(d), d.shape)
        raise PlanarSnakeError(
            f"Assumption 3 violated: obstacles {i} and {j} have edges {smallest:.4f} m apart, "
            f"not more than the link length {link_length_m:.4f} m"
        )
    return smallest


def lattice_field(
    x_range_m: tuple[float, float],
    y_rows_m: list[float],
    spacing_x_m: float,
    radius_m: float,
    row_offsets_m: list[float] | None = None,
) -> ObstacleField:
    """Rows of equally spaced circles: row r at y = y_rows_m[r], x = x0 + row_offsets_m[r] + k spacing_x_m."""
    if spacing_x_m <= 0 or radius_m <= 0:
        raise PlanarSnakeError("spacing_x_m and radius_m must be positive")
    offsets = row_offsets_m if row_offsets_m is not None else [0.0] * len(y_rows_m)
    if len(offsets) != len(y_rows_m):
        raise PlanarSnakeError(f"row_offsets_m needs {len(y_rows_m)} entries (one per row), got {len(offsets)}")
    centres = []
    for y, off in zip(y_rows_m, offsets, strict=True):
        xs = np.arange(x_range_m[0] + off, x_range_m[1] + 1e-12, spacing_x_m)
        centres.extend((x, y) for x in xs)
    centres_arr = np.array(centres, dtype=float).reshape(-1, 2)
    return ObstacleField(centres_arr, np.full(len(centres_arr), float(radius_m)))


def random_field(
    seed: int,
    x_range_m: tuple[float, float],
    y_range_m: tuple[float, float],
    count: int,
    radius_range_m: tuple[float, float],
    min_edge_distance_m: float,
    max_attempts: int = 100_000,
) -> ObstacleField:
    """Random circles by sequential rejection sampling (seeded): each new circle keeps its edge more than
    ``min_edge_distance_m`` from every earlier one (pass the link length 2l for Assumption 3)."""
    rng = np.random.default_rng(seed)
    centres: list[np.ndarray] = []
    radii: list[float] = []
    attempts = 0
    while len(centres) < count:
        attempts += 1
        if attempts > max_attempts:
            raise PlanarSnakeError(
                f"could not place {count} obstacles with edge distance > {min_edge_distance_m} m in the region "
                f"after {max_attempts} attempts (placed {len(centres)}); lower count or enlarge the region"
            )
        c = np.array([rng.uniform(*x_range_m), rng.uniform(*y_range_m)])
        r = float(rng.uniform(*radius_range_m))
        if centres:
            gaps = np.linalg.norm(np.array(centres) - c, axis=1) - np.array(radii) - r
            if gaps.min() <= min_edge_distance_m:
                continue
        centres.append(c)
        radii.append(r)
    return ObstacleField(np.array(centres).reshape(-1, 2), np.array(radii))


def remove_overlapping(field: ObstacleField, gaps_to_body_m: np.ndarray, clearance_m: float) -> ObstacleField:
    """Drop the obstacles closer than ``clearance_m`` to the initial body (gaps per obstacle, e.g. the minimum over
    links of ``all_gaps``), so the run starts without contact."""
    keep = gaps_to_body_m > clearance_m
    return ObstacleField(field.centres_m[keep], field.radii_m[keep])
