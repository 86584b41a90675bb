"""Marker detection in camera images: coloured blobs (HSV threshold + centroid) and ArUco markers (OpenCV)."""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from aiko.core.errors import ConfigError


@dataclass(frozen=True)
class HsvRange:
    """Inclusive OpenCV HSV bounds (H 0–179, S and V 0–255). ``h_min > h_max`` wraps through red (H = 0)."""

    h_min: int
    h_max: int
    s_min: int = 80
    s_max: int = 255
    v_min: int = 60
    v_max: int = 255

    def __post_init__(self) -> None:
        for name, value, top in (
            ("h_min", self.h_min, 179),
            ("h_max", self.h_max, 179),
            ("s_min", self.s_min, 255),
            ("s_max", self.s_max, 255),
            ("v_min", self.v_min, 255),
            ("v_max", self.v_max, 255),
        ):
            if not 0 <= value <= top:
                raise ConfigError(f"HSV bound {name} = {value} outside 0..{top}")

    def mask(self, hsv: np.ndarray) -> np.ndarray:
        lo_sv, hi_sv = (self.s_min, self.v_min), (self.s_max, self.v_max)
        if self.h_min <= self.h_max:
            return cv2.inRange(hsv, (self.h_min, *lo_sv), (self.h_max, *hi_sv))
        return cv2.inRange(hsv, (self.h_min, *lo_sv), (179, *hi_sv)) | cv2.inRange(
            hsv, (0, *lo_sv), (self.h_max, *hi_sv)
        )


@dataclass(frozen=True)
class Blob:
    centroid_px: np.ndarray  # (2,) x, y
    area_px: float


def find_colour_blobs(image_bgr: np.ndarray, hsv_range: HsvRange, min_area_px: float = 12.0) -> list[Blob]:
    """Blobs of the colour, largest first. The centroid is intensity-weighted by the soft edge of the mask
    (saturation × value inside the hue band) so that anti-aliased edges pull it to sub-pixel accuracy."""
    hsv = cv2.cvtColor(image_bgr, cv2.COLOR_BGR2HSV)
    mask = hsv_range.mask(hsv)
    # Dilate once so the soft (partially covered) edge pixels belong to the blob; weight by saturation there.
    grown = cv2.dilate(mask, np.ones((3, 3), np.uint8))
    n, labels, stats, _ = cv2.connectedComponentsWithStats(grown, connectivity=8)
    weight = hsv[:, :, 1].astype(np.float64) * (grown > 0)
    blobs = []
    for label in range(1, n):
        if stats[label, cv2.CC_STAT_AREA] < min_area_px:
            continue
        x, y, w, h = stats[label, :4]
        region = labels[y : y + h, x : x + w] == label
        wts = weight[y : y + h, x : x + w] * region
        total = wts.sum()
        if total <= 0:
            continue
        yy, xx = np.mgrid[y : y + h, x : x + w]
        blobs.append(Blob(np.array([(xx * wts).sum() / total, (yy * wts).sum() / total]), float(region.sum())))
    blobs.sort(key=lambda b: -b.area_px)
    return blobs


@dataclass(frozen=True)
class ArucoMarker:
    marker_id: int
    corners_px: np.ndarray  # (4, 2) in OpenCV order: top-left, top-right, bottom-right, bottom-left

    @property
    def centre_px(self) -> np.ndarray:
        """Intersection of the diagonals: the image of the square's centre under perspective (the corner mean
        is not)."""
        return diagonal_intersection(self.corners_px)


def diagonal_intersection(corners: np.ndarray) -> np.ndarray:
    p0, p1, p2, p3 = (np.append(c, 1.0) for c in np.asarray(corners, dtype=np.float64))
    x = np.cross(np.cross(p0, p2), np.cross(p1, p3))
    return x[:2] / x[2]


ARUCO_DICTIONARIES = {name: getattr(cv2.aruco, name) for name in dir(cv2.aruco) if name.startswith("DICT_")}


class ArucoFinder:
    """ArUco detection with sub-pixel corner refinement (``cv2.aruco.ArucoDetector``)."""

    def __init__(self, dictionary: str = "DICT_4X4_50") -> None:
        if dictionary not in ARUCO_DICTIONARIES:
            raise ConfigError(f"unknown ArUco dictionary {dictionary!r}; e.g. DICT_4X4_50, DICT_5X5_100, DICT_6X6_250")
        self.dictionary = cv2.aruco.getPredefinedDictionary(ARUCO_DICTIONARIES[dictionary])
        params = cv2.aruco.DetectorParameters()
        params.cornerRefinementMethod = cv2.aruco.CORNER_REFINE_SUBPIX
        params.cornerRefinementWinSize = 5
        params.cornerRefinementMinAccuracy = 0.01
        params.cornerRefinementMaxIterations = 50
        self.detector = cv2.aruco.ArucoDetector(self.dictionary, params)

    def find(self, image: np.ndarray) -> dict[int, ArucoMarker]:
        gray = image if image.ndim == 2 else cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)
        corners, ids, _ = self.detector.detectMarkers(gray)
        if ids is None:
            return {}
        return {
            int(i): ArucoMarker(int(i), c.reshape(4, 2).astype(np.float64))
            for i, c in zip(ids.ravel(), corners, strict=True)
        }

    def marker_image(self, marker_id: int, side_px: int) -> np.ndarray:
        """The marker's picture (for printing, and for rendering test scenes)."""
        return cv2.aruco.generateImageMarker(self.dictionary, marker_id, side_px)
