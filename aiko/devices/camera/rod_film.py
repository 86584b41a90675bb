"""Filming a simulated rod: rod states q → :class:`RodScene` (centreline, radii, red beads) for the synthetic camera,
the beads' true positions and strains, and a side camera placed to frame the whole run.

Uses the Cosserat model's own kinematics (``sim.cosserat``) so the beads sit exactly where the simulator puts the
arc lengths ``marker_arc_m`` — the truth for the tracker and the observer.
"""

from __future__ import annotations

import numpy as np

from aiko.core.errors import ConfigError
from aiko.devices.camera.calibration import CameraIntrinsics
from aiko.devices.camera.plane import CameraPose, MarkerPlane, look_at
from aiko.devices.camera.synthetic import RodScene
from sim.cosserat import RodDescription, build_model
from sim.cosserat.forces import sweep_points


class RodFilm:
    """Scenes of one rod (``n_sections`` as in the simulation, so q has the same layout)."""

    def __init__(
        self,
        rod: RodDescription,
        n_sections: int,
        marker_arc_m,
        *,
        bead_extra_radius_m: float = 0.0015,
        centreline_points: int = 61,
    ) -> None:
        arc = np.asarray(marker_arc_m, dtype=float)
        if arc.ndim != 1 or len(arc) < 1 or np.any(np.diff(arc) <= 0) or arc[0] < 0 or arc[-1] > rod.length_m:
            raise ConfigError(f"rod film: marker arc lengths must increase within 0..{rod.length_m} m")
        self.rod = rod
        self.marker_arc_m = arc
        self.dense_arc_m = np.linspace(0.0, rod.length_m, centreline_points)
        self.model = build_model(rod, n_sections, extra_points_m=tuple(self.dense_arc_m) + tuple(arc))
        extra = self.model.grid.extra_index
        self._dense = extra[:centreline_points]
        self._markers = extra[centreline_points:]
        self.bead_radius_m = rod.radius_m(arc) + bead_extra_radius_m

    def markers_m(self, q: np.ndarray) -> np.ndarray:
        """True bead centres (k, 3)."""
        return sweep_points(self.model, q)[self._markers]

    def strain_nodes(self, q: np.ndarray) -> np.ndarray:
        """True strains [κ; ε] at the strain nodes (n+1, 6)."""
        return q[6:].reshape(-1, 6) + self.model.xi_ref_nodes

    def scene(self, q: np.ndarray) -> RodScene:
        p = sweep_points(self.model, q)
        return RodScene(p[self._dense], self.rod.radius_m(self.dense_arc_m), p[self._markers], self.bead_radius_m)

    def exposure(self, q_before: np.ndarray, q: np.ndarray, q_after: np.ndarray, samples: int) -> list[RodScene]:
        """Scenes across one exposure: q linearly interpolated half-way to the neighbouring states on each side."""
        if samples <= 1:
            return [self.scene(q)]
        weights = np.linspace(-0.5, 0.5, samples)
        return [self.scene(q + abs(w) * ((q_after if w > 0 else q_before) - q)) for w in weights]


def frame_side_camera(
    points_m: np.ndarray, intrinsics: CameraIntrinsics, *, margin: float = 1.3, plane_y_m: float = 0.0
) -> tuple[CameraPose, MarkerPlane]:
    """A camera on the −y side looking along +y at the x–z plane, far enough for ``points_m`` (any, 3) — the rod
    over the whole run — to fill the image with ``margin`` to spare, image up = +z."""
    pts = np.asarray(points_m, dtype=float).reshape(-1, 3)
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    centre = 0.5 * (lo + hi)
    w, h = intrinsics.image_size
    fx, fy = intrinsics.camera_matrix[0, 0], intrinsics.camera_matrix[1, 1]
    distance = margin * max((hi[0] - lo[0]) * fx / w, (hi[2] - lo[2]) * fy / h, 1e-3)
    eye = np.array([centre[0], plane_y_m - distance, centre[2]])
    return look_at(eye, (centre[0], plane_y_m, centre[2])), MarkerPlane.vertical_xz(plane_y_m)
