"""A side camera filming a planar rod (constant-curvature arc in the x–z plane) with red beads: exact truth for the
tracker tests."""

from __future__ import annotations

import numpy as np

from aiko.devices.camera.calibration import CameraIntrinsics
from aiko.devices.camera.plane import MarkerPlane, calibration_from_pose, look_at
from aiko.devices.camera.red_markers import PixelsToWorld, RedMarkerSettings, RedMarkerTracker
from aiko.devices.camera.synthetic import RodScene, SyntheticCamera, SyntheticCameraSettings

LENGTH_M = 0.2
BASE_M = np.array([0.0, 0.0, 0.18])
INTRINSICS = CameraIntrinsics(np.array([[800.0, 0, 320], [0, 800, 240], [0, 0, 1]]), np.zeros(5), (640, 480))
POSE = look_at((0.06, -0.45, 0.12), (0.06, 0.0, 0.1))
PLANE = MarkerPlane.vertical_xz()


def arc_points(arc_m: np.ndarray, curvature_1_m: float, heading_rad: float = -1.0, base_m=BASE_M) -> np.ndarray:
    """Exact points of a planar arc in x–z starting at ``base_m`` along ``heading_rad`` (from +x towards +z)."""
    s = np.asarray(arc_m, dtype=float)
    if abs(curvature_1_m) < 1e-9:
        x, z = s * np.cos(heading_rad), s * np.sin(heading_rad)
    else:
        th = heading_rad + curvature_1_m * s
        x = (np.sin(th) - np.sin(heading_rad)) / curvature_1_m
        z = -(np.cos(th) - np.cos(heading_rad)) / curvature_1_m
    return np.column_stack([x, np.zeros_like(x), z]) + np.asarray(base_m)


def scene(marker_arc_m, curvature_1_m: float, heading_rad: float = -1.0, base_m=BASE_M) -> RodScene:
    dense = np.linspace(0.0, LENGTH_M, 61)
    return RodScene(
        arc_points(dense, curvature_1_m, heading_rad, base_m),
        np.full(len(dense), 0.005),
        arc_points(marker_arc_m, curvature_1_m, heading_rad, base_m),
        0.006,
    )


def camera(noise_sigma: float = 2.0, seed: int = 0) -> SyntheticCamera:
    return SyntheticCamera(INTRINSICS, POSE, SyntheticCameraSettings(noise_sigma=noise_sigma, seed=seed))


def to_world() -> PixelsToWorld:
    return PixelsToWorld(calibration_from_pose(INTRINSICS, POSE, PLANE), PLANE)


def tracker(marker_arc_m, **settings) -> RedMarkerTracker:
    tw = to_world()
    hint = tw.to_pixels(BASE_M[None])[0]
    return RedMarkerTracker(
        RedMarkerSettings(len(marker_arc_m), **settings), marker_arc_m=marker_arc_m, base_hint_px=hint, to_world=tw
    )


def disc_px(centre_px, radius_px: float, n: int = 32) -> np.ndarray:
    a = np.linspace(0, 2 * np.pi, n, endpoint=False)
    return np.column_stack([centre_px[0] + radius_px * np.cos(a), centre_px[1] + radius_px * np.sin(a)])
