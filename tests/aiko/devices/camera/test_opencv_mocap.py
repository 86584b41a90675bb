"""OpenCV marker tracking on synthetic images rendered with a known camera: metric error < 1 mm."""

import math

import cv2
import numpy as np
import pytest

from aiko.core.errors import ConfigError
from aiko.devices.camera.calibration import (
    CalibrationError,
    CameraIntrinsics,
    PlaneCalibration,
    calibrate_intrinsics,
    calibrate_plane,
)
from aiko.devices.camera.markers import ArucoFinder, HsvRange, diagonal_intersection, find_colour_blobs
from aiko.devices.camera.opencv_mocap import MarkerSpec, MarkerTracker, OpenCVMocap
from tests.aiko.devices.camera.render import Scene, look_at_camera, render

PATTERN = (9, 6)
SQUARE_M = 0.025
BOARD_ORIGIN_M = (-0.12, -0.08)
RED = HsvRange(170, 10)
BLUE = HsvRange(95, 115)
TOL_M = 1e-3


def _scene(aruco_centre=(0.25, 0.18), red=(-0.30, 0.20), blue=(0.31, -0.22), rotate_quarter_turns=0):
    scene = Scene()
    scene.add_chessboard(BOARD_ORIGIN_M, PATTERN, SQUARE_M)
    finder = ArucoFinder()
    marker = np.rot90(finder.marker_image(7, 60), rotate_quarter_turns)
    truth = {"aruco": scene.add_aruco(marker, aruco_centre, 0.04)}
    scene.add_disc(red, 0.012, (0, 0, 230))
    scene.add_disc(blue, 0.012, (230, 120, 0))
    truth["red"], truth["blue"] = np.array(red), np.array(blue)
    return scene, truth


def _ideal(camera):
    return CameraIntrinsics(camera.camera_matrix, camera.dist_coeffs, camera.size)


@pytest.mark.parametrize("camera_position", [(0.1, -0.25, 1.0), (-0.3, 0.2, 0.9), (0.0, 0.0, 1.1)])
def test_markers_located_within_1mm_from_known_intrinsics(camera_position):
    scene, truth = _scene()
    camera = look_at_camera(camera_position, (0.0, 0.0, 0.0))
    image = render(scene, camera)
    plane = calibrate_plane(image, _ideal(camera), PATTERN, SQUARE_M, origin_m=BOARD_ORIGIN_M)
    assert plane.rms_residual_m < 1e-4
    tracker = MarkerTracker(
        plane, [MarkerSpec("aruco", aruco_id=7), MarkerSpec("red", hsv=RED), MarkerSpec("blue", hsv=BLUE)]
    )
    position, quaternion, occluded = tracker.process(image)
    assert not occluded.any()
    for i, name in enumerate(("aruco", "red", "blue")):
        error = np.linalg.norm(position[i, :2] - truth[name])
        assert error < TOL_M, f"{name}: {error * 1e3:.3f} mm"
    assert np.all(position[:, 2] == 0.0)
    yaw = 2 * math.atan2(quaternion[0, 3], quaternion[0, 0])
    assert abs(yaw) < math.radians(1.0)
    assert np.isnan(quaternion[1:]).all()  # colour blobs carry no orientation


def test_aruco_heading_follows_the_marker():
    scene, truth = _scene(rotate_quarter_turns=1)  # marker turned 90° counter-clockwise seen from above
    camera = look_at_camera((0.05, -0.1, 1.0), (0.0, 0.0, 0.0))
    image = render(scene, camera)
    plane = calibrate_plane(image, _ideal(camera), PATTERN, SQUARE_M, origin_m=BOARD_ORIGIN_M)
    position, quaternion, _ = MarkerTracker(plane, [MarkerSpec("a", aruco_id=7)]).process(image)
    yaw = 2 * math.atan2(quaternion[0, 3], quaternion[0, 0])
    assert abs(yaw - math.pi / 2) < math.radians(1.0)
    assert np.linalg.norm(position[0, :2] - truth["aruco"]) < TOL_M


def test_intrinsics_and_distortion_calibrated_from_views_then_markers_within_1mm():
    dist = np.array([-0.12, 0.05, 0.0, 0.0, 0.0])
    scene, truth = _scene()
    views = []
    for position in [
        (0.0, 0.0, 0.55),
        (0.25, 0.0, 0.5),
        (-0.25, 0.05, 0.5),
        (0.0, 0.25, 0.5),
        (0.05, -0.25, 0.5),
        (0.2, 0.2, 0.6),
        (-0.2, -0.2, 0.6),
    ]:
        camera = look_at_camera(position, (0.005, 0.0, 0.0), fx_px=1000.0, dist=dist)
        views.append(render(scene, camera))
    intrinsics = calibrate_intrinsics(views, PATTERN, SQUARE_M)
    true_k = look_at_camera((0, 0, 1), (0, 0, 0), fx_px=1000.0).camera_matrix
    assert intrinsics.rms_reprojection_px < 0.2
    np.testing.assert_allclose(intrinsics.camera_matrix[[0, 1], [0, 1]], true_k[[0, 1], [0, 1]], rtol=0.01)
    assert abs(intrinsics.dist_coeffs[0] - dist[0]) < 0.03
    # a distorted working view of the whole floor
    camera = look_at_camera((0.05, -0.2, 1.0), (0.0, 0.0, 0.0), fx_px=1000.0, dist=dist)
    image = render(scene, camera)
    plane = calibrate_plane(image, intrinsics, PATTERN, SQUARE_M, origin_m=BOARD_ORIGIN_M)
    tracker = MarkerTracker(
        plane, [MarkerSpec("aruco", aruco_id=7), MarkerSpec("red", hsv=RED), MarkerSpec("blue", hsv=BLUE)]
    )
    position, _, occluded = tracker.process(image)
    assert not occluded.any()
    for i, name in enumerate(("aruco", "red", "blue")):
        assert np.linalg.norm(position[i, :2] - truth[name]) < TOL_M, name
    # ignoring the distortion would be visibly wrong: the test can fail
    naive = PlaneCalibration(
        CameraIntrinsics(intrinsics.camera_matrix, np.zeros(5), intrinsics.image_size), plane.homography
    )
    blob = find_colour_blobs(image, BLUE)[0]
    assert np.linalg.norm(naive.to_plane(blob.centroid_px[None])[0] - truth["blue"]) > 2 * TOL_M


def test_occluded_marker_is_nan_and_flagged_never_zero():
    scene, _ = _scene()
    camera = look_at_camera((0.0, 0.0, 1.0), (0.0, 0.0, 0.0))
    image = render(scene, camera)
    plane = calibrate_plane(image, _ideal(camera), PATTERN, SQUARE_M, origin_m=BOARD_ORIGIN_M)
    tracker = MarkerTracker(plane, [MarkerSpec("missing", aruco_id=3), MarkerSpec("green", hsv=HsvRange(50, 70))])
    position, quaternion, occluded = tracker.process(image)
    assert occluded.all() and np.isnan(position).all() and np.isnan(quaternion).all()


def test_calibration_errors_are_specific():
    blank = np.full((480, 640, 3), 200, np.uint8)
    camera = look_at_camera((0.0, 0.0, 1.0), (0.0, 0.0, 0.0), size=(640, 480))
    with pytest.raises(CalibrationError, match="not found"):
        calibrate_plane(blank, _ideal(camera), PATTERN, SQUARE_M)
    with pytest.raises(CalibrationError, match="at least 3 views"):
        calibrate_intrinsics([blank], PATTERN, SQUARE_M)
    with pytest.raises(ConfigError, match="exactly one"):
        MarkerSpec("x")
    with pytest.raises(ConfigError, match="h_min"):
        HsvRange(200, 10)


def test_diagonal_intersection_is_the_projective_centre():
    # a square seen in perspective: the corner mean is off, the diagonal intersection is the image of the centre
    h = np.array([[1.0, 0.2, 5.0], [0.1, 1.1, 3.0], [0.002, 0.001, 1.0]])
    square = np.array([[0, 0], [1, 0], [1, 1], [0, 1]], float) * 100
    img = cv2.perspectiveTransform(square.reshape(-1, 1, 2), h).reshape(-1, 2)
    centre = cv2.perspectiveTransform(np.array([[[50.0, 50.0]]]), h).ravel()
    np.testing.assert_allclose(diagonal_intersection(img), centre, atol=1e-9)
    assert np.linalg.norm(img.mean(axis=0) - centre) > 0.5


def test_video_file_mode_tracks_a_moving_marker(tmp_path):
    camera = look_at_camera((0.0, -0.1, 1.0), (0.0, 0.0, 0.0), size=(960, 720), fx_px=800.0)
    truths = []
    for k in range(6):
        scene, truth = _scene(red=(-0.3 + 0.02 * k, 0.2))
        cv2.imwrite(str(tmp_path / f"frame_{k:04d}.png"), render(scene, camera))
        truths.append(truth["red"])
        if k == 0:
            plane = calibrate_plane(render(scene, camera), _ideal(camera), PATTERN, SQUARE_M, origin_m=BOARD_ORIGIN_M)
    mocap = OpenCVMocap(
        str(tmp_path / "frame_%04d.png"), MarkerTracker(plane, [MarkerSpec("red", hsv=RED)]), rate_hz=20.0
    )
    with mocap:
        samples = [mocap.sample(1_000_000_000 + k * 50_000_000) for k in range(7)]
    for k in range(6):
        assert samples[k].frame == k
        assert np.linalg.norm(samples[k].position_m[0, :2] - truths[k]) < TOL_M
        assert samples[k].capture_t_ns == 1_000_000_000 + k * 50_000_000
    assert samples[6].occluded.all()  # the video has ended
    assert [e.kind for e in mocap.pop_events()] == ["mocap_video_ended"]


def test_missing_video_is_a_config_error(tmp_path):
    camera = look_at_camera((0.0, 0.0, 1.0), (0.0, 0.0, 0.0))
    plane = PlaneCalibration(_ideal(camera), np.eye(3))
    mocap = OpenCVMocap(str(tmp_path / "nope.mp4"), MarkerTracker(plane, [MarkerSpec("red", hsv=RED)]))
    with pytest.raises(ConfigError, match="not found"):
        mocap.start()


class FakeCamera:
    """cv2.VideoCapture stand-in for the live (threaded) mode: a few good frames, failed reads, good again."""

    def __init__(self, frames, fail_after=3, fail_count=4):
        self.frames, self.fail_after, self.fail_count = frames, fail_after, fail_count
        self.reads = 0

    def isOpened(self):  # noqa: N802 - OpenCV's name
        return True

    def get(self, prop):
        return 30.0

    def read(self):
        import time

        time.sleep(0.005)
        self.reads += 1
        if self.fail_after <= self.reads - 1 < self.fail_after + self.fail_count:
            return False, None
        return True, self.frames[self.reads % len(self.frames)]

    def release(self):
        pass


def test_live_camera_mode_latest_frame_stale_and_events():
    import time

    scene, truth = _scene()
    camera = look_at_camera((0.0, -0.1, 1.0), (0.0, 0.0, 0.0), size=(960, 720), fx_px=800.0)
    image = render(scene, camera)
    plane = calibrate_plane(image, _ideal(camera), PATTERN, SQUARE_M, origin_m=BOARD_ORIGIN_M)
    fake = FakeCamera([image])
    clock = time.monotonic_ns
    mocap = OpenCVMocap(
        0,
        MarkerTracker(plane, [MarkerSpec("aruco", aruco_id=7)]),
        capture_factory=lambda s: fake,
        stale_after_s=0.5,
        clock_ns=clock,
    )
    with mocap:
        deadline = time.monotonic() + 10
        while fake.reads < 12 and time.monotonic() < deadline:
            time.sleep(0.01)
        sample = mocap.sample(clock())
        assert not sample.occluded[0]
        assert np.linalg.norm(sample.position_m[0, :2] - truth["aruco"]) < TOL_M
        assert sample.capture_t_ns <= sample.t_ns  # grabbed before it was handed over
        stale = mocap.sample(clock() + 2_000_000_000)
    assert stale.occluded.all() and np.isnan(stale.position_m).all()
    assert [e.kind for e in mocap.pop_events()] == ["mocap_camera_lost", "mocap_camera_recovered"]
