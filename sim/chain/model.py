"""Immutable description of a chain (or tree) of rigid bodies joined by revolute joints (paper 002).

Body i hangs from its parent p(i) (or from the base frame when p(i) = -1) through revolute joint i:

    joint origin  o_i = x_p + R_p d^(J_i/p)        (d^(J_i/p): parent CoM -> joint i, parent frame)
    rotation      R_i = R_p exp(theta_i g_i^)      (g_i: unit generator axis, same components in both frames)
    CoM           x_i = o_i + R_i d^(i/J_i)        (d^(i/J_i): joint i -> CoM i, body frame)

For a root body the "parent" is the base frame (the world for the paper's wall-pinned snake, or a tracked link
for Aiko's floating base), so its joint offset is the joint position in the base frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

STANDARD_GRAVITY_M_S2 = 9.81

AXIS_LETTERS = {"x": 0, "y": 1, "z": 2, "1": 0, "2": 1, "3": 2}


class ChainModelError(ValueError):
    """A chain description is inconsistent (shapes, parent order, non-unit axes, negative masses...)."""


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=float)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class Chain:
    """Geometry and inertia of n bodies; arrays are read-only copies.

    parent[i] < i (topological order) or -1 for a body attached to the base frame. A serial chain has
    parent = (-1, 0, 1, ..., n-2).
    """

    parent: np.ndarray  # (n,) int
    joint_axis: np.ndarray  # (n, 3) unit generators g_i
    joint_offset_m: np.ndarray  # (n, 3) d^(J_i/p(i)) in the parent (or base) frame
    com_offset_m: np.ndarray  # (n, 3) d^(i/J_i) in body frame i
    mass_kg: np.ndarray  # (n,)
    inertia_kg_m2: np.ndarray  # (n, 3, 3) CoM inertia in body frame
    gravity_m_s2: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, -STANDARD_GRAVITY_M_S2]))
    #: path[i, j] is True when joint j moves body i (j is i or an ancestor of i); derived, not an argument
    path: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        parent = np.array(self.parent, dtype=np.int64).reshape(-1)
        n = parent.size
        if n < 1:
            raise ChainModelError("a chain needs at least one body")
        for name, shape in [
            ("joint_axis", (n, 3)),
            ("joint_offset_m", (n, 3)),
            ("com_offset_m", (n, 3)),
            ("mass_kg", (n,)),
            ("inertia_kg_m2", (n, 3, 3)),
            ("gravity_m_s2", (3,)),
        ]:
            value = np.asarray(getattr(self, name), dtype=float)
            if value.shape != shape:
                raise ChainModelError(f"{name} must have shape {shape} for {n} bodies, got {value.shape}")
            if not np.all(np.isfinite(value)):
                raise ChainModelError(f"{name} contains non-finite values")
            object.__setattr__(self, name, _frozen(value))
        bad = [i for i in range(n) if not (-1 <= parent[i] < i)]
        if bad:
            raise ChainModelError(
                f"parent[{bad[0]}] = {parent[bad[0]]}: each parent must be -1 (base) or an earlier body index"
            )
        parent.setflags(write=False)
        object.__setattr__(self, "parent", parent)
        norms = np.linalg.norm(self.joint_axis, axis=1)
        if not np.allclose(norms, 1.0, atol=1e-12):
            i = int(np.argmax(np.abs(norms - 1.0)))
            raise ChainModelError(f"joint_axis[{i}] has norm {norms[i]:.6g}; generator axes must be unit vectors")
        if np.any(self.mass_kg < 0):
            raise ChainModelError(f"mass_kg must be >= 0, got {self.mass_kg.min():.6g}")
        J = self.inertia_kg_m2
        if not np.allclose(J, np.swapaxes(J, 1, 2), atol=1e-15 + 1e-12 * np.abs(J).max()):
            raise ChainModelError("inertia_kg_m2 must be symmetric")
        if np.any(np.linalg.eigvalsh(J) < -1e-15):
            raise ChainModelError("inertia_kg_m2 must be positive semi-definite")
        # path[i, j] is True when joint j moves body i (j is i or one of its ancestors)
        path = np.zeros((n, n), dtype=bool)
        for i in range(n):
            path[i, i] = True
            if parent[i] >= 0:
                path[i] |= path[parent[i]]
        path.setflags(write=False)
        object.__setattr__(self, "path", path)

    @property
    def n_bodies(self) -> int:
        return int(self.parent.size)

    @property
    def is_serial(self) -> bool:
        return bool(np.array_equal(self.parent, np.arange(-1, self.n_bodies - 1)))


def axes_from_letters(axes: str, n: int) -> np.ndarray:
    """'zyzy...' (or '3232...') -> (n, 3) unit generators; the string must name exactly n axes."""
    if len(axes) != n:
        raise ChainModelError(
            f"axes must name one generator per body: {n} characters from x/y/z (or 1/2/3), got {len(axes)} "
            f"({axes!r}); e.g. {('zy' * n)[:n]!r}"
        )
    unknown = sorted({c for c in axes.lower() if c not in AXIS_LETTERS})
    if unknown:
        raise ChainModelError(f"axes contains {unknown}; allowed letters are x, y, z (or 1, 2, 3)")
    return np.eye(3)[[AXIS_LETTERS[c] for c in axes.lower()]]


def cylinder_inertia_kg_m2(mass_kg: float, length_m: float, radius_m: float) -> np.ndarray:
    """Solid cylinder along e1 about its CoM: diag(m r^2/2, m(3r^2 + L^2)/12, m(3r^2 + L^2)/12)."""
    axial = 0.5 * mass_kg * radius_m**2
    transverse = mass_kg * (3.0 * radius_m**2 + length_m**2) / 12.0
    return np.diag([axial, transverse, transverse])


def uniform_chain(
    n: int,
    link_length_m: float,
    link_mass_kg: float,
    link_radius_m: float,
    axes: str,
    gravity_m_s2: float = STANDARD_GRAVITY_M_S2,
) -> Chain:
    """Serial chain of n identical solid cylinders along e1; joint 1 pins body 1 to the world at the origin.

    d^(i/J_i) = d^(J_{i+1}/i) = (L/2, 0, 0); gravity points along -e3 (erratum of eq. 79).
    """
    if int(n) != n or n < 1:
        raise ChainModelError(f"n must be a positive integer number of bodies, got {n!r}")
    n = int(n)
    for name, value in [("link_length_m", link_length_m), ("link_mass_kg", link_mass_kg)]:
        if not value > 0:
            raise ChainModelError(f"{name} must be > 0, got {value!r}")
    if not link_radius_m >= 0:
        raise ChainModelError(f"link_radius_m must be >= 0, got {link_radius_m!r}")
    half = np.array([0.5 * link_length_m, 0.0, 0.0])
    joint_offset = np.tile(half, (n, 1))
    joint_offset[0] = 0.0
    return Chain(
        parent=np.arange(-1, n - 1),
        joint_axis=axes_from_letters(axes, n),
        joint_offset_m=joint_offset,
        com_offset_m=np.tile(half, (n, 1)),
        mass_kg=np.full(n, float(link_mass_kg)),
        inertia_kg_m2=np.tile(cylinder_inertia_kg_m2(link_mass_kg, link_length_m, link_radius_m), (n, 1, 1)),
        gravity_m_s2=np.array([0.0, 0.0, -gravity_m_s2]),
    )
