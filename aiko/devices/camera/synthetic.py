"""A synthetic camera for hardware-in-the-loop runs and tests: the simulated rod and its red markers, drawn as a
pinhole camera at a known pose would see them, so the tracker and the strain observer have an exact truth.

What is drawn (painter's order, far things first):

* the scene behind: the table plane z = 0 (per-pixel ray cast once, shaded by distance) and a back wall;
* background items (red clutter lying on the table, any polygon in pixels);
* the rod: a tube along the centreline (N, 3) with radii (N,), projected radius f·r/depth, shaded in bands as a
  cylinder lit from the camera (a ring light around the lens, the usual light of a fast camera);
* the markers: red beads (spheres) at given centres with a given radius, shaded the same way;
* foreground items (the arm that holds the base, passing in front of the rod: any polygon in pixels);
* motion blur: the average of renders at several instants of the exposure (pass several scenes);
* sensor noise: Gaussian, in grey levels, per channel (from a seeded bank of ``cv2.randn`` frames, so a run is
  repeatable).

Drawing is OpenCV's anti-aliased polygon and circle fill with 4 fractional bits (``shift=4``), so edges land with
sub-pixel accuracy: the tracker's sub-pixel centroids are tested against something sub-pixel. The projection of
points is ``cv2.projectPoints`` (lens distortion included); the tube between two projected points is straight.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import cv2
import numpy as np

from aiko.core.errors import ConfigError
from aiko.devices.camera.calibration import CameraIntrinsics
from aiko.devices.camera.plane import CameraPose

_SHIFT = 4
_NOISE_BANK = 4
_NOISE_PAD = 64
_ONE = 1 << _SHIFT
# (radius fraction, brightness) bands of a cylinder / sphere lit from the viewing direction: Lambert n·l = sqrt(1-s²)
_BANDS = ((1.0, 0.45), (0.85, 0.7), (0.6, 0.88), (0.3, 1.0))


@dataclass(frozen=True)
class RodScene:
    """One instant: the rod's centreline and radii, and its marker beads (centres on the centreline)."""

    centreline_m: np.ndarray  # (N, 3)
    radii_m: np.ndarray  # (N,)
    markers_m: np.ndarray  # (k, 3)
    marker_radius_m: np.ndarray | float  # (k,) or one value

    def __post_init__(self) -> None:
        c = np.asarray(self.centreline_m)
        if c.ndim != 2 or c.shape[1] != 3 or len(c) < 2:
            raise ConfigError(f"synthetic camera: centreline must be (N >= 2, 3), got {c.shape}")
        if np.asarray(self.radii_m).shape != (len(c),):
            raise ConfigError(f"synthetic camera: radii must be ({len(c)},), got {np.asarray(self.radii_m).shape}")
        if np.asarray(self.markers_m).reshape(-1, 3).shape[0] != np.asarray(self.markers_m).size // 3:
            raise ConfigError("synthetic camera: markers must be (k, 3)")


@dataclass(frozen=True)
class Polygon:
    """A flat polygon drawn in pixels (clutter on the table, the arm in front of the rod)."""

    points_px: np.ndarray  # (m, 2)
    colour_bgr: tuple[int, int, int] = (60, 60, 60)


@dataclass(frozen=True)
class SyntheticCameraSettings:
    fps: float = 100.0
    noise_sigma: float = 2.0  # grey levels
    seed: int = 0
    table_bgr: tuple[int, int, int] = (150, 160, 165)
    wall_bgr: tuple[int, int, int] = (200, 200, 195)
    rod_bgr: tuple[int, int, int] = (215, 220, 225)  # translucent white silicone
    marker_bgr: tuple[int, int, int] = (40, 35, 215)  # red plastic
    table_height_m: float = 0.0

    def __post_init__(self) -> None:
        if not 1.0 <= self.fps <= 10000.0:
            raise ConfigError(f"synthetic camera: fps must lie in 1..10000, got {self.fps}")
        if not self.noise_sigma >= 0:
            raise ConfigError(f"synthetic camera: noise_sigma must be >= 0, got {self.noise_sigma}")


@dataclass
class SyntheticCamera:
    intrinsics: CameraIntrinsics
    pose: CameraPose
    settings: SyntheticCameraSettings = field(default_factory=SyntheticCameraSettings)

    def __post_init__(self) -> None:
        self._background = np.clip(np.rint(self._render_background()), 0, 255).astype(np.uint8)
        self._frame_index = 0
        self._noise_bank = self._make_noise_bank()
        self._rvec = cv2.Rodrigues(np.asarray(self.pose.rotation, dtype=np.float64))[0]

    @property
    def size(self) -> tuple[int, int]:
        return self.intrinsics.image_size

    def project(self, points_m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """World points (n, 3) → distorted pixels (n, 2) and depths (n,) along the optical axis (m)."""
        pts = np.asarray(points_m, dtype=np.float64).reshape(-1, 3)
        depth = self.pose.to_camera(pts)[:, 2]
        px, _ = cv2.projectPoints(
            pts,
            self._rvec,
            self.pose.translation_m.astype(np.float64),
            self.intrinsics.camera_matrix,
            self.intrinsics.dist_coeffs,
        )
        return px.reshape(-1, 2), depth

    def _render_background(self) -> np.ndarray:
        w, h = self.size
        s = self.settings
        k_inv = np.linalg.inv(self.intrinsics.camera_matrix)
        u, v = np.meshgrid(np.arange(w) + 0.0, np.arange(h) + 0.0)
        rays_cam = np.stack([u, v, np.ones_like(u)], axis=-1) @ k_inv.T
        rays = rays_cam @ self.pose.rotation  # camera → world directions (Rᵀ d)
        centre = self.pose.centre_m
        with np.errstate(divide="ignore", invalid="ignore"):
            dist = (s.table_height_m - centre[2]) / rays[..., 2]
        on_table = np.isfinite(dist) & (dist > 0)
        img = np.empty((h, w, 3), np.float32)
        img[:] = np.asarray(s.wall_bgr, np.float32)
        falloff = np.clip(1.2 - 0.35 * np.where(on_table, dist, 0.0), 0.6, 1.0)[..., None]
        img = np.where(on_table[..., None], np.asarray(s.table_bgr, np.float32) * falloff, img)
        return img.astype(np.float32)

    def render(
        self,
        scenes: RodScene | list[RodScene],
        background_items: tuple[Polygon, ...] = (),
        foreground_items: tuple[Polygon, ...] = (),
    ) -> np.ndarray:
        """One frame (H, W, 3) BGR uint8. Several scenes = the instants of one exposure (motion blur)."""
        scene_list = [scenes] if isinstance(scenes, RodScene) else list(scenes)
        if not scene_list:
            raise ConfigError("synthetic camera: render needs at least one scene")
        acc = None if len(scene_list) == 1 else np.zeros(self._background.shape, np.float32)
        for scene in scene_list:
            img = self._background.copy()
            for item in background_items:
                _fill(img, item.points_px, item.colour_bgr)
            self._draw_rod(img, scene)
            self._draw_markers(img, scene)
            for item in foreground_items:
                _fill(img, item.points_px, item.colour_bgr)
            if acc is not None:
                cv2.accumulate(img, acc)
        out = self._add_noise(img if acc is None else acc, 1.0 / len(scene_list))
        self._frame_index += 1
        return out

    def _make_noise_bank(self) -> list[np.ndarray] | None:
        """Four frames of Gaussian noise (σ/√2 each), _NOISE_PAD px larger than the image in both directions.

        ``cv2.randn`` of a full 640×480×3 frame costs 2–7 ms, more than drawing the scene; a frame's noise is
        instead the sum of two bank frames cut at random offsets (4·65² choices each), which is Gaussian with the
        right σ, repeatable from the seed, and uncorrelated between frames unless both cuts repeat."""
        sigma = float(self.settings.noise_sigma)
        if sigma <= 0:
            return None
        w, h = self.size
        cv2.setRNGSeed(int(self.settings.seed) * 1_000_003 + 17)
        bank = []
        for _ in range(_NOISE_BANK):
            frame = np.empty((h + _NOISE_PAD, w + _NOISE_PAD, 3), np.float32)
            cv2.randn(frame, (0.0, 0.0, 0.0), (sigma / np.sqrt(2),) * 3)  # a scalar would be the first channel only
            bank.append(frame)
        return bank

    def _add_noise(self, img: np.ndarray, scale: float) -> np.ndarray:
        """``img`` × ``scale`` + noise, rounded and saturated to uint8 (``img`` is the blur accumulator or a frame)."""
        if self._noise_bank is None:
            return img if img.dtype == np.uint8 else cv2.convertScaleAbs(img, alpha=scale)
        w, h = self.size
        rng = np.random.default_rng((int(self.settings.seed), self._frame_index))
        picks = rng.integers(0, [_NOISE_BANK, _NOISE_PAD + 1, _NOISE_PAD + 1], size=(2, 3))
        (a, ya, xa), (b, yb, xb) = picks
        noise = cv2.add(self._noise_bank[a][ya : ya + h, xa : xa + w], self._noise_bank[b][yb : yb + h, xb : xb + w])
        return cv2.addWeighted(img, scale, noise, 1.0, 0.0, dtype=cv2.CV_8U)

    def _draw_rod(self, img: np.ndarray, scene: RodScene) -> None:
        px, depth = self.project(scene.centreline_m)
        if np.any(depth <= 0):
            raise ConfigError("synthetic camera: part of the rod is behind the camera")
        f = float(self.intrinsics.camera_matrix[0, 0])
        r_px = f * np.asarray(scene.radii_m, dtype=float) / depth
        # the tube's outline as one polygon per shading band: offsets along the per-point normals (mean of the
        # adjacent segments'); one fillPoly per band instead of one per segment. Folds (a bend sharper than the
        # radius in the image) would fill even-odd: not a shape a rod makes.
        seg = np.diff(px, axis=0)
        tangent = seg / np.linalg.norm(seg, axis=1, keepdims=True).clip(1e-9)
        point_tangent = np.vstack([tangent[:1], tangent[:-1] + tangent[1:], tangent[-1:]])
        point_tangent /= np.linalg.norm(point_tangent, axis=1, keepdims=True).clip(1e-9)
        normal = np.column_stack([-point_tangent[:, 1], point_tangent[:, 0]])
        base = np.asarray(self.settings.rod_bgr, dtype=float)
        for frac, light in _BANDS:
            colour = tuple(float(c) for c in base * light)
            offset = (frac * r_px)[:, None] * normal
            outline = np.vstack([px + offset, (px - offset)[::-1]])
            _fill(img, outline, colour)
            for end in (0, len(px) - 1):
                _circle(img, px[end], frac * r_px[end], colour)

    def _draw_markers(self, img: np.ndarray, scene: RodScene) -> None:
        centres = np.asarray(scene.markers_m, dtype=float).reshape(-1, 3)
        if len(centres) == 0:
            return
        px, depth = self.project(centres)
        radius = np.broadcast_to(np.asarray(scene.marker_radius_m, dtype=float), (len(centres),))
        # a sphere's outline is a slightly larger ellipse than f·r/d off-axis; f·r/d is exact on the axis and
        # within 0.1 % at the corners of a 60° field: ignored
        r_px = float(self.intrinsics.camera_matrix[0, 0]) * radius / depth
        base = np.asarray(self.settings.marker_bgr, dtype=float)
        order = np.argsort(-depth)  # far beads first
        for frac, light in _BANDS:
            colour = tuple(float(c) for c in base * light)
            for i in order:
                _circle(img, px[i], frac * r_px[i], colour)


def _circle(img: np.ndarray, centre_px: np.ndarray, radius_px: float, colour) -> None:
    c = tuple(int(v) for v in np.rint(np.asarray(centre_px) * _ONE))
    cv2.circle(img, c, max(int(round(radius_px * _ONE)), 1), colour, -1, cv2.LINE_AA, _SHIFT)


def _fill(img: np.ndarray, points_px: np.ndarray, colour) -> None:
    pts = np.rint(np.asarray(points_px, dtype=float).reshape(-1, 2) * _ONE).astype(np.int32)
    cv2.fillPoly(img, [pts], tuple(float(c) for c in colour), cv2.LINE_AA, _SHIFT)


def rod_scene_from_shape(
    points_m: np.ndarray,
    arc_m: np.ndarray,
    radius_of_arc,
    marker_arc_m: np.ndarray,
    marker_radius_m: float | np.ndarray,
) -> RodScene:
    """A scene from a centreline sampled at arc lengths ``arc_m`` (N,) and a radius function r(X): the markers
    are put on the centreline at ``marker_arc_m`` by linear interpolation along the samples."""
    pts = np.asarray(points_m, dtype=float)
    arc = np.asarray(arc_m, dtype=float)
    markers = np.column_stack([np.interp(marker_arc_m, arc, pts[:, d]) for d in range(3)])
    return RodScene(pts, np.asarray(radius_of_arc(arc), dtype=float), markers, marker_radius_m)
