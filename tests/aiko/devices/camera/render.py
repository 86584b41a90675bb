"""Synthetic camera images of a floor plane with a chessboard, ArUco markers and coloured discs, rendered with a
known pinhole camera (and optional radial distortion), anti-aliased by supersampling. Ground truth for the
OpenCV marker tracking tests."""

from __future__ import annotations

from dataclasses import dataclass, field

import cv2
import numpy as np

TEXTURE_M_PER_PX = 0.00025
PLANE_X_M = (-0.45, 0.45)
PLANE_Y_M = (-0.35, 0.35)


@dataclass
class Scene:
    """Everything on the floor, in plane metres. The texture is the floor seen from above (z up, y towards the
    top of the picture): texture pixel (u, v) is at plane (x_min + u·s, y_max − v·s)."""

    texture: np.ndarray = field(default=None)  # BGR uint8

    def __post_init__(self) -> None:
        w = round((PLANE_X_M[1] - PLANE_X_M[0]) / TEXTURE_M_PER_PX) + 1
        h = round((PLANE_Y_M[1] - PLANE_Y_M[0]) / TEXTURE_M_PER_PX) + 1
        self.texture = np.full((h, w, 3), 235, np.uint8)

    @staticmethod
    def to_texture_px(xy_m: np.ndarray) -> np.ndarray:
        xy = np.asarray(xy_m, dtype=np.float64)
        return np.stack([xy[..., 0] - PLANE_X_M[0], PLANE_Y_M[1] - xy[..., 1]], -1) / TEXTURE_M_PER_PX

    @staticmethod
    def texture_to_plane() -> np.ndarray:
        s = TEXTURE_M_PER_PX
        return np.array([[s, 0, PLANE_X_M[0]], [0, -s, PLANE_Y_M[1]], [0, 0, 1.0]])

    def add_chessboard(self, origin_m, pattern_size, square_m) -> None:
        """Board whose first inner corner is at origin_m; (cols+1)×(rows+1) squares, white margin around."""
        cols, rows = pattern_size
        for i in range(-1, cols):
            for j in range(-1, rows):
                if (i + j) % 2:
                    continue
                p0 = self.to_texture_px(np.asarray(origin_m) + [i * square_m, j * square_m])
                p1 = self.to_texture_px(np.asarray(origin_m) + [(i + 1) * square_m, (j + 1) * square_m])
                x0, x1 = sorted(np.round([p0[0], p1[0]]).astype(int))
                y0, y1 = sorted(np.round([p0[1], p1[1]]).astype(int))
                self.texture[y0:y1, x0:x1] = 20

    def add_aruco(self, marker_image: np.ndarray, centre_m, side_m) -> None:
        side_px = round(side_m / TEXTURE_M_PER_PX)
        c = self.to_texture_px(centre_m)
        x0, y0 = np.round(c - side_px / 2).astype(int)
        # a white quiet zone of one module around the marker, as printed
        q = side_px // 6
        self.texture[y0 - q : y0 + side_px + q, x0 - q : x0 + side_px + q] = 255
        img = cv2.resize(marker_image, (side_px, side_px), interpolation=cv2.INTER_NEAREST)
        self.texture[y0 : y0 + side_px, x0 : x0 + side_px] = img[:, :, None]
        u, v = np.array([x0, y0]) + side_px / 2 - 0.5
        return np.array([PLANE_X_M[0] + u * TEXTURE_M_PER_PX, PLANE_Y_M[1] - v * TEXTURE_M_PER_PX])

    def add_disc(self, centre_m, radius_m, bgr) -> None:
        shift = 4
        c = np.round(self.to_texture_px(centre_m) * (1 << shift)).astype(int)
        r = round(radius_m / TEXTURE_M_PER_PX * (1 << shift))
        cv2.circle(self.texture, (int(c[0]), int(c[1])), r, bgr, -1, cv2.LINE_AA, shift)


@dataclass(frozen=True)
class Camera:
    camera_matrix: np.ndarray
    rotation: np.ndarray  # world → camera
    translation: np.ndarray
    size: tuple[int, int] = (1280, 960)
    dist_coeffs: np.ndarray = field(default_factory=lambda: np.zeros(5))

    def plane_to_image(self) -> np.ndarray:
        r = self.rotation
        return self.camera_matrix @ np.column_stack([r[:, 0], r[:, 1], self.translation])


def look_at_camera(position_m, target_m, fx_px=1100.0, size=(1280, 960), dist=None) -> Camera:
    position_m = np.asarray(position_m, dtype=float)
    forward = np.asarray(target_m, dtype=float) - position_m
    forward /= np.linalg.norm(forward)
    right = np.cross(forward, [0.0, 1.0, 0.0])
    if np.linalg.norm(right) < 1e-6:
        right = np.cross(forward, [1.0, 0.0, 0.0])
    right /= np.linalg.norm(right)
    down = np.cross(forward, right)
    rotation = np.vstack([right, down, forward])  # camera x right, y down, z forward
    k = np.array([[fx_px, 0, size[0] / 2 - 0.5], [0, fx_px, size[1] / 2 - 0.5], [0, 0, 1]])
    return Camera(k, rotation, -rotation @ position_m, size, np.zeros(5) if dist is None else np.asarray(dist, float))


def render(scene: Scene, camera: Camera, supersample: int = 3) -> np.ndarray:
    s = supersample
    a = np.array([[s, 0, (s - 1) / 2], [0, s, (s - 1) / 2], [0, 0, 1.0]])
    h_hi = a @ camera.plane_to_image() @ Scene.texture_to_plane()
    w, h = camera.size
    hi = cv2.warpPerspective(
        scene.texture,
        h_hi,
        (w * s, h * s),
        flags=cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_CONSTANT,
        borderValue=(90, 90, 90),
    )
    ideal = cv2.resize(hi, (w, h), interpolation=cv2.INTER_AREA)
    if not np.any(camera.dist_coeffs):
        return ideal
    # distorted pixel → ideal pinhole pixel, then sample the ideal image there
    grid = np.stack(np.meshgrid(np.arange(w, dtype=np.float64), np.arange(h, dtype=np.float64)), -1).reshape(-1, 1, 2)
    src = cv2.undistortPoints(grid, camera.camera_matrix, camera.dist_coeffs, P=camera.camera_matrix)
    src = src.reshape(h, w, 2).astype(np.float32)
    return cv2.remap(ideal, src[:, :, 0], src[:, :, 1], cv2.INTER_LINEAR, borderValue=(90, 90, 90))
