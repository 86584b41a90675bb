"""Where the markers are in the world: the plane they move in, and the homographies that map pixels onto it.

A :class:`~aiko.devices.camera.calibration.PlaneCalibration` maps undistorted pixels to 2-D metric coordinates
(u, v) on the plane where the calibration board lay. :class:`MarkerPlane` says where that plane sits in the world
(origin + two axes), so (u, v) become world points (3,). Two set-ups are covered:

* camera above the table, rod lying on it: the board lay on the table; the markers' centres sit a marker height
  above it, so :func:`calibration_at_height` moves the homography up to that height (pose recovered from the
  table homography, no second board view needed);
* camera beside the bench, rod bending in a vertical plane (paper 004, X: the rod's base is held by the arm, its
  tip on the table): the board stood in that plane, and :class:`MarkerPlane` maps (u, v) to (x, z).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from aiko.core.errors import ConfigError
from aiko.devices.camera.calibration import CameraIntrinsics, PlaneCalibration


@dataclass(frozen=True)
class CameraPose:
    """World → camera: x_cam = R x_world + t (OpenCV camera axes: x right, y down, z forward)."""

    rotation: np.ndarray  # (3, 3)
    translation_m: np.ndarray  # (3,)

    @property
    def centre_m(self) -> np.ndarray:
        """The camera's optical centre in world coordinates."""
        return -self.rotation.T @ self.translation_m

    def to_camera(self, points_m: np.ndarray) -> np.ndarray:
        return np.asarray(points_m, dtype=float) @ self.rotation.T + self.translation_m


def look_at(eye_m, target_m, up=(0.0, 0.0, 1.0)) -> CameraPose:
    """Pose of a camera at ``eye_m`` looking at ``target_m`` with ``up`` pointing to the top of the image."""
    eye, target = np.asarray(eye_m, dtype=float), np.asarray(target_m, dtype=float)
    forward = target - eye
    if not np.linalg.norm(forward) > 0:
        raise ConfigError("look_at: eye and target coincide")
    z = forward / np.linalg.norm(forward)
    x = np.cross(z, np.asarray(up, dtype=float))
    if not np.linalg.norm(x) > 1e-9:
        raise ConfigError("look_at: up is parallel to the viewing direction")
    x /= np.linalg.norm(x)
    y = np.cross(z, x)  # image y points down
    rotation = np.vstack([x, y, z])
    return CameraPose(rotation, -rotation @ eye)


@dataclass(frozen=True)
class MarkerPlane:
    """The plane of the calibration in the world: point (u, v) on it is ``origin_m + u·u_axis + v·v_axis``.

    The default is the table (world z up) at height 0: (u, v) = (x, y), as :class:`PlaneCalibration` assumes."""

    origin_m: np.ndarray = field(default_factory=lambda: np.zeros(3))
    u_axis: np.ndarray = field(default_factory=lambda: np.array([1.0, 0.0, 0.0]))
    v_axis: np.ndarray = field(default_factory=lambda: np.array([0.0, 1.0, 0.0]))

    def __post_init__(self) -> None:
        u, v = np.asarray(self.u_axis, dtype=float), np.asarray(self.v_axis, dtype=float)
        if u.shape != (3,) or v.shape != (3,) or np.asarray(self.origin_m).shape != (3,):
            raise ConfigError("marker plane: origin_m, u_axis and v_axis must be 3-vectors")
        if abs(np.linalg.norm(u) - 1) > 1e-6 or abs(np.linalg.norm(v) - 1) > 1e-6 or abs(u @ v) > 1e-6:
            raise ConfigError("marker plane: u_axis and v_axis must be orthonormal")

    @staticmethod
    def table(height_m: float = 0.0) -> MarkerPlane:
        return MarkerPlane(np.array([0.0, 0.0, height_m]))

    @staticmethod
    def vertical_xz(y_m: float = 0.0) -> MarkerPlane:
        """The vertical plane y = y_m, (u, v) = (x, z): a side camera filming a rod that bends in x–z."""
        return MarkerPlane(np.array([0.0, y_m, 0.0]), np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0]))

    def to_world(self, uv_m: np.ndarray) -> np.ndarray:
        uv = np.asarray(uv_m, dtype=float).reshape(-1, 2)
        return self.origin_m + uv[:, :1] * self.u_axis + uv[:, 1:] * self.v_axis

    def to_plane(self, points_m: np.ndarray) -> np.ndarray:
        d = np.asarray(points_m, dtype=float).reshape(-1, 3) - self.origin_m
        return np.column_stack([d @ self.u_axis, d @ self.v_axis])


def plane_to_pixel_homography(intrinsics: CameraIntrinsics, pose: CameraPose, plane: MarkerPlane) -> np.ndarray:
    """Plane (u, v, 1) → ideal pixel homography of a camera at ``pose``: K [R·u_axis, R·v_axis, R·origin + t]."""
    r = pose.rotation
    m = np.column_stack([r @ plane.u_axis, r @ plane.v_axis, r @ plane.origin_m + pose.translation_m])
    return intrinsics.camera_matrix @ m


def calibration_from_pose(intrinsics: CameraIntrinsics, pose: CameraPose, plane: MarkerPlane) -> PlaneCalibration:
    """The exact plane calibration of a known camera (the synthetic camera's, or a pose from ``cv2.solvePnP``)."""
    h = np.linalg.inv(plane_to_pixel_homography(intrinsics, pose, plane))
    return PlaneCalibration(intrinsics, h / h[2, 2], 0.0, 0.0)


def pose_from_calibration(calibration: PlaneCalibration) -> tuple[np.ndarray, np.ndarray]:
    """Camera rotation columns and translation in the *calibration board's* frame, recovered from its homography.

    K⁻¹ H⁻¹ = s [r1 r2 t] (Zhang's decomposition); s from ‖r1‖ (averaged with ‖r2‖), its sign from t_z > 0 (the
    board is in front of the camera). r3 = r1 × r2 is the board's normal (z up for a right-handed board)."""
    k = calibration.intrinsics.camera_matrix
    m = np.linalg.solve(k, np.linalg.inv(calibration.homography))
    scale = 0.5 * (np.linalg.norm(m[:, 0]) + np.linalg.norm(m[:, 1]))
    m = m / scale
    if m[2, 2] < 0:
        m = -m
    r1, r2, t = m[:, 0], m[:, 1], m[:, 2]
    # re-orthonormalise (noise in a measured homography): polar decomposition of [r1 r2 r1×r2]
    u, _, vt = np.linalg.svd(np.column_stack([r1, r2, np.cross(r1, r2)]))
    rot = u @ vt
    return rot, t


def calibration_at_height(calibration: PlaneCalibration, height_m: float) -> PlaneCalibration:
    """The same camera's calibration for the parallel plane ``height_m`` above the board (towards the camera when
    the board's frame is right-handed with z up, as :func:`aiko.devices.camera.calibration.calibrate_plane` makes it).

    Markers on a rod lying on the table sit one rod radius (plus the marker's own thickness) above it; mapping
    their pixels with the table homography puts them too far from the camera's nadir by height/camera height."""
    rot, t = pose_from_calibration(calibration)
    k = calibration.intrinsics.camera_matrix
    h_up = k @ np.column_stack([rot[:, 0], rot[:, 1], t + height_m * rot[:, 2]])
    h = np.linalg.inv(h_up)
    return PlaneCalibration(calibration.intrinsics, h / h[2, 2], calibration.plane_height_m + height_m, float("nan"))
