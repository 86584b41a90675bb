"""Camera calibration for marker tracking: intrinsics from chessboard views, and the homography that maps
undistorted image points to metric coordinates on the floor plane (both with OpenCV).

Markers on the robot sit at some height above the floor; the plane homography is exact for points on the plane
where the calibration board lay, so lay the board at marker height (or give ``plane_height_m``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from aiko.core.errors import ConfigError


class CalibrationError(ConfigError):
    """The calibration target was not found or the calibration is unusable."""


@dataclass(frozen=True)
class CameraIntrinsics:
    camera_matrix: np.ndarray  # (3, 3) pixels
    dist_coeffs: np.ndarray  # OpenCV order k1, k2, p1, p2[, k3, ...]
    image_size: tuple[int, int]  # (width, height) px
    rms_reprojection_px: float = float("nan")

    def undistort_px(self, points_px: np.ndarray) -> np.ndarray:
        """Distorted pixel coordinates (k, 2) → ideal pinhole pixel coordinates (same camera matrix)."""
        pts = np.asarray(points_px, dtype=np.float64).reshape(-1, 1, 2)
        if not np.any(self.dist_coeffs):
            return pts.reshape(-1, 2)
        return cv2.undistortPoints(pts, self.camera_matrix, self.dist_coeffs, P=self.camera_matrix).reshape(-1, 2)

    def to_dict(self) -> dict[str, Any]:
        return {
            "camera_matrix": self.camera_matrix.tolist(),
            "dist_coeffs": self.dist_coeffs.ravel().tolist(),
            "image_size": list(self.image_size),
            "rms_reprojection_px": self.rms_reprojection_px,
        }

    @staticmethod
    def from_dict(data: dict[str, Any]) -> CameraIntrinsics:
        return CameraIntrinsics(
            np.asarray(data["camera_matrix"], dtype=np.float64).reshape(3, 3),
            np.asarray(data["dist_coeffs"], dtype=np.float64).ravel(),
            (int(data["image_size"][0]), int(data["image_size"][1])),
            float(data.get("rms_reprojection_px", float("nan"))),
        )


@dataclass(frozen=True)
class PlaneCalibration:
    """Pixels → metres on the floor plane: undistort, then apply ``homography`` (ideal px → plane m)."""

    intrinsics: CameraIntrinsics
    homography: np.ndarray  # (3, 3)
    plane_height_m: float = 0.0
    rms_residual_m: float = float("nan")

    def to_plane(self, points_px: np.ndarray) -> np.ndarray:
        ideal = self.intrinsics.undistort_px(points_px).reshape(-1, 1, 2)
        if ideal.size == 0:
            return np.zeros((0, 2))
        return cv2.perspectiveTransform(ideal, self.homography).reshape(-1, 2)

    def to_dict(self) -> dict[str, Any]:
        return {
            "intrinsics": self.intrinsics.to_dict(),
            "homography": self.homography.tolist(),
            "plane_height_m": self.plane_height_m,
            "rms_residual_m": self.rms_residual_m,
        }

    @staticmethod
    def from_dict(data: dict[str, Any]) -> PlaneCalibration:
        return PlaneCalibration(
            CameraIntrinsics.from_dict(data["intrinsics"]),
            np.asarray(data["homography"], dtype=np.float64).reshape(3, 3),
            float(data.get("plane_height_m", 0.0)),
            float(data.get("rms_residual_m", float("nan"))),
        )

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1))

    @staticmethod
    def load(path: str | Path) -> PlaneCalibration:
        from aiko.core.config import read_config_text
        from aiko.core.errors import ConfigError

        if not Path(path).exists():
            raise CalibrationError(f"camera calibration file not found: {path}")
        try:
            text = read_config_text(path, "camera calibration file")
        except ConfigError as exc:
            raise CalibrationError(str(exc)) from None
        try:
            return PlaneCalibration.from_dict(json.loads(text))
        except FileNotFoundError:
            raise CalibrationError(f"camera calibration file not found: {path}") from None
        except (KeyError, ValueError, TypeError) as exc:
            raise CalibrationError(f"{path}: not a plane calibration ({exc})") from None


def board_points_m(pattern_size: tuple[int, int], square_m: float) -> np.ndarray:
    """Inner-corner coordinates (cols·rows, 2) on the board, row-major as OpenCV returns the corners."""
    cols, rows = pattern_size
    grid = np.mgrid[0:cols, 0:rows].T.reshape(-1, 2).astype(np.float64)
    return grid * square_m


def find_board_corners(image: np.ndarray, pattern_size: tuple[int, int]) -> np.ndarray | None:
    """Chessboard inner corners (k, 2) px with sub-pixel accuracy, or None."""
    gray = image if image.ndim == 2 else cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)
    found, corners = cv2.findChessboardCornersSB(gray, pattern_size, flags=cv2.CALIB_CB_ACCURACY)
    if not found:
        return None
    return corners.reshape(-1, 2).astype(np.float64)


def calibrate_intrinsics(
    images: Sequence[np.ndarray], pattern_size: tuple[int, int], square_m: float
) -> CameraIntrinsics:
    """Camera matrix and distortion from several chessboard views (``cv2.calibrateCamera``)."""
    object_points, image_points = [], []
    board = np.hstack([board_points_m(pattern_size, square_m), np.zeros((pattern_size[0] * pattern_size[1], 1))])
    size = None
    for image in images:
        corners = find_board_corners(image, pattern_size)
        size = (image.shape[1], image.shape[0])
        if corners is not None:
            object_points.append(board.astype(np.float32))
            image_points.append(corners.astype(np.float32).reshape(-1, 1, 2))
    if len(image_points) < 3:
        raise CalibrationError(
            f"chessboard {pattern_size} found in {len(image_points)} of {len(images)} images; need at least 3 views"
        )
    rms, k, dist, _, _ = cv2.calibrateCamera(object_points, image_points, size, None, None)
    return CameraIntrinsics(k, dist.ravel(), size, float(rms))


def calibrate_plane(
    image: np.ndarray,
    intrinsics: CameraIntrinsics,
    pattern_size: tuple[int, int],
    square_m: float,
    *,
    origin_m: tuple[float, float] = (0.0, 0.0),
    plane_height_m: float = 0.0,
) -> PlaneCalibration:
    """Homography from one view of the board lying on the plane (z up, camera above it).

    Board convention: ``pattern_size = (cols, rows)`` inner corners with cols ≠ rows; the
    board's x axis runs along the ``cols`` direction, y along ``rows``; the origin corner (placed at ``origin_m``)
    is the inner corner of a *black* corner square, and x, y, z form a right-handed frame. OpenCV may number the
    corners from any end, so the numbering is re-oriented to this convention (image handedness + square colour).
    """
    gray = image if image.ndim == 2 else cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)
    corners = find_board_corners(gray, pattern_size)
    if corners is None:
        raise CalibrationError(f"chessboard with {pattern_size} inner corners not found in the calibration image")
    cols, rows = pattern_size
    board = board_points_m(pattern_size, square_m)
    grid = corners.reshape(rows, cols, 2)
    for candidate in (grid, grid[:, ::-1], grid[::-1, :], grid[::-1, ::-1]):
        ideal = intrinsics.undistort_px(candidate.reshape(-1, 2))
        homography, _ = cv2.findHomography(ideal, board, method=0)
        if homography is None:
            continue
        if _board_orientation_ok(gray, intrinsics, np.linalg.inv(homography), square_m):
            break
    else:
        raise CalibrationError(
            "cannot orient the chessboard: lay it flat with the camera above, and give pattern_size as "
            "(inner corners along x, inner corners along y)"
        )
    shift = np.array([[1.0, 0.0, origin_m[0]], [0.0, 1.0, origin_m[1]], [0.0, 0.0, 1.0]])
    homography = shift @ homography
    plane = board + np.asarray(origin_m)
    mapped = cv2.perspectiveTransform(ideal.reshape(-1, 1, 2), homography).reshape(-1, 2)
    rms = float(np.sqrt(np.mean(np.sum((mapped - plane) ** 2, axis=1))))
    return PlaneCalibration(intrinsics, homography, plane_height_m, rms)


def _board_orientation_ok(
    gray: np.ndarray, intrinsics: CameraIntrinsics, plane_to_ideal: np.ndarray, square_m: float
) -> bool:
    """Right-handed as seen from above (image y points down, so the plane→image Jacobian has det < 0) and the
    square diagonally outside the origin corner is darker than its neighbour along +x."""
    h = plane_to_ideal

    def project(xy: tuple[float, float]) -> np.ndarray:
        p = h @ np.array([xy[0], xy[1], 1.0])
        return p[:2] / p[2]

    eps = 0.1 * square_m
    o, ex, ey = project((0.0, 0.0)), project((eps, 0.0)), project((0.0, eps))
    if np.linalg.det(np.column_stack([ex - o, ey - o])) >= 0:
        return False
    half = 0.5 * square_m
    dark = _sample(gray, intrinsics, project((-half, -half)))
    light = _sample(gray, intrinsics, project((half, -half)))
    return dark < light


def _sample(gray: np.ndarray, intrinsics: CameraIntrinsics, ideal_px: np.ndarray) -> float:
    """Mean intensity in a 3×3 window at the *distorted* image location of an ideal pixel."""
    k = intrinsics.camera_matrix
    normalised = np.linalg.solve(k, np.array([ideal_px[0], ideal_px[1], 1.0]))
    point = np.array([[normalised[0] / normalised[2], normalised[1] / normalised[2], 1.0]])
    px, _ = cv2.projectPoints(point, np.zeros(3), np.zeros(3), k, intrinsics.dist_coeffs)
    x, y = np.round(px.ravel()).astype(int)
    if not (1 <= x < gray.shape[1] - 1 and 1 <= y < gray.shape[0] - 1):
        return float("inf")
    return float(gray[y - 1 : y + 2, x - 1 : x + 2].mean())
