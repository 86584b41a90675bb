"""Plane geometry (pixels → world, the marker-height shift) and the synthetic camera (repeatable noise, motion
blur, a top-down view of a rod lying on the table)."""

import numpy as np
import pytest

from aiko.core.errors import ConfigError
from aiko.devices.camera.calibration import CameraIntrinsics
from aiko.devices.camera.plane import (
    MarkerPlane,
    calibration_at_height,
    calibration_from_pose,
    look_at,
    pose_from_calibration,
)
from aiko.devices.camera.red_markers import PixelsToWorld, RedMarkerSettings, RedMarkerTracker
from aiko.devices.camera.synthetic import RodScene, SyntheticCamera, SyntheticCameraSettings
from tests.aiko.devices.camera import scene as sc

TOP = look_at((0.12, -0.05, 0.55), (0.1, 0.0, 0.0), up=(0.0, 1.0, 0.0))


def test_calibration_at_height_matches_the_plane_at_that_height():
    table = calibration_from_pose(sc.INTRINSICS, TOP, MarkerPlane.table(0.0))
    lifted = calibration_at_height(table, 0.012)
    exact = calibration_from_pose(sc.INTRINSICS, TOP, MarkerPlane.table(0.012))
    px = np.random.default_rng(0).uniform([0, 0], [640, 480], size=(50, 2))
    np.testing.assert_allclose(lifted.to_plane(px), exact.to_plane(px), atol=1e-9)
    assert lifted.plane_height_m == pytest.approx(0.012)
    # the shift matters: at 12 mm the table homography is off by about 12 mm · (offset from nadir) / 0.55 m
    assert np.abs(table.to_plane(px) - exact.to_plane(px)).max() > 5e-3
    rot, t = pose_from_calibration(table)
    np.testing.assert_allclose(rot, TOP.rotation.T.T @ np.eye(3), atol=1e-9)
    np.testing.assert_allclose(t, TOP.translation_m, atol=1e-9)


def test_pixels_to_world_round_trip_with_lens_distortion():
    intr = CameraIntrinsics(sc.INTRINSICS.camera_matrix, np.array([-0.12, 0.03, 0.0, 0.0, 0.0]), (640, 480))
    cam = SyntheticCamera(intr, sc.POSE, SyntheticCameraSettings(noise_sigma=0.0))
    to_world = PixelsToWorld(calibration_from_pose(intr, sc.POSE, sc.PLANE), sc.PLANE)
    points = sc.arc_points(np.linspace(0, 0.2, 9), 7.0)
    px, _ = cam.project(points)
    np.testing.assert_allclose(to_world(px), points, atol=1e-7)
    np.testing.assert_allclose(to_world.to_pixels(points), px, atol=1e-6)
    assert np.isnan(to_world(np.array([[np.nan, np.nan]]))).all()


def test_top_down_camera_rod_lying_on_the_table_needs_the_marker_height():
    """Beads (centre 5 mm above the table) tracked by a camera 0.55 m above: with the calibration lifted to the
    bead height the positions are within 0.15 mm; with the table's own homography they are millimetres off."""
    cam = SyntheticCamera(sc.INTRINSICS, TOP, SyntheticCameraSettings(noise_sigma=2.0, seed=2))
    arc = np.linspace(0.0, 0.2, 41)
    heading = 0.3
    theta = heading + 6.0 * arc
    xy = np.column_stack(
        [(np.sin(theta) - np.sin(heading)) / 6.0, -(np.cos(theta) - np.cos(heading)) / 6.0]
    )  # a planar arc lying on the table
    centre = np.column_stack([xy, np.full(len(arc), 0.005)])
    marker_arc = np.linspace(0.025, 0.195, 7)
    markers = np.column_stack([np.interp(marker_arc, arc, centre[:, d]) for d in range(3)])
    scene = RodScene(centre, np.full(len(arc), 0.005), markers, 0.006)
    table = calibration_from_pose(sc.INTRINSICS, TOP, MarkerPlane.table(0.0))
    errors = {}
    for name, cal in (("lifted", calibration_at_height(table, 0.005)), ("table", table)):
        to_world = PixelsToWorld(cal)
        hint = to_world.to_pixels(centre[:1])[0]
        tracker = RedMarkerTracker(RedMarkerSettings(7), marker_arc_m=marker_arc, base_hint_px=hint, to_world=to_world)
        obs = tracker.process(cam.render(scene))
        assert obs.visible.all()
        errors[name] = 1e3 * np.abs(obs.world_m[:, :2] - markers[:, :2]).max()
    # interpolated marker centres are on chords, the beads too: the truth is the drawn bead centre
    assert errors["lifted"] < 0.15
    assert errors["table"] > 1.0


def test_noise_is_repeatable_per_seed_and_has_the_given_sigma():
    shape = sc.scene(np.linspace(0.03, 0.19, 5), 4.0)
    a = sc.camera(noise_sigma=3.0, seed=1).render(shape)
    b = sc.camera(noise_sigma=3.0, seed=1).render(shape)
    c = sc.camera(noise_sigma=3.0, seed=2).render(shape)
    clean = sc.camera(noise_sigma=0.0).render(shape)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    residual = a.astype(float)[:100, :100] - clean.astype(float)[:100, :100]  # the wall: no clipping
    assert residual.std() == pytest.approx(3.0, rel=0.1)


def test_motion_blur_smears_a_moving_bead_around_its_mid_exposure_position():
    """Five instants of a rod translating 16 mm (≈ 28 px) in one exposure: the bead's blob is longer than wide and its
    centroid lies on the mid-exposure position (the tracker reports where the marker was half-way)."""
    marker_arc = np.linspace(0.03, 0.19, 5)
    shifts = np.linspace(-0.008, 0.008, 5)
    instants = [sc.scene(marker_arc, 4.0, base_m=sc.BASE_M + [s, 0, 0]) for s in shifts]
    cam = sc.camera(noise_sigma=1.0, seed=3)
    tracker = sc.tracker(marker_arc)
    blurred = cam.render(instants)
    blobs = tracker.find_blobs(blurred)
    assert len(blobs) == 5
    assert min(b.elongation for b in blobs) > 1.2
    obs = tracker.process(blurred)
    mid, _ = cam.project(instants[2].markers_m)
    assert np.abs(obs.pixels - mid).max() < 0.3
    sharp = tracker.find_blobs(cam.render(instants[2]))
    assert max(b.elongation for b in sharp) < 1.1


def test_scene_and_settings_errors():
    with pytest.raises(ConfigError, match="centreline must be"):
        RodScene(np.zeros((1, 3)), np.zeros(1), np.zeros((0, 3)), 0.0)
    with pytest.raises(ConfigError, match="fps must lie"):
        SyntheticCameraSettings(fps=0.0)
    with pytest.raises(ConfigError, match="orthonormal"):
        MarkerPlane(np.zeros(3), np.array([1.0, 0, 0]), np.array([1.0, 0, 0]))
    with pytest.raises(ConfigError, match="behind the camera"):
        sc.camera().render(sc.scene(np.linspace(0.03, 0.19, 5), 0.0, base_m=(0.0, -0.6, 0.1)))


def test_rod_film_puts_beads_at_their_arc_lengths_and_the_side_camera_frames_the_rod():
    from aiko.devices.camera.rod_film import RodFilm, frame_side_camera
    from sim.cosserat import uniform_rod

    rod = uniform_rod(0.2, 0.005, 1e6, 1000.0)
    film = RodFilm(rod, 4, [0.05, 0.1, 0.15])
    q = np.zeros(film.model.n_dof)
    q[0:6] = [0.0, 0.0, 0.0, 0.01, 0.0, 0.1]  # straight along +x from (0.01, 0, 0.1)
    np.testing.assert_allclose(film.markers_m(q), [[0.06, 0, 0.1], [0.11, 0, 0.1], [0.16, 0, 0.1]], atol=1e-12)
    np.testing.assert_allclose(film.strain_nodes(q)[:, 3], 1.0)
    scene = film.scene(q)
    assert scene.centreline_m.shape == (61, 3) and np.allclose(scene.marker_radius_m, 0.0065)
    pose, plane = frame_side_camera(scene.centreline_m, sc.INTRINSICS)
    cam = SyntheticCamera(sc.INTRINSICS, pose, SyntheticCameraSettings(noise_sigma=0.0))
    px, depth = cam.project(scene.centreline_m)
    assert np.all(depth > 0) and px[:, 0].min() > 0 and px[:, 0].max() < 640
    assert (px[:, 0].max() - px[:, 0].min()) > 640 / 1.3 - 1  # the rod fills the width, margin 1.3
    assert np.allclose(plane.v_axis, [0, 0, 1]) and np.allclose(pose.centre_m[[0, 2]], [0.11, 0.1])
    with pytest.raises(ConfigError, match="marker arc lengths"):
        RodFilm(rod, 4, [0.1, 0.05])
