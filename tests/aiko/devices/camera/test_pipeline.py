"""Frames of a simulated bent rod → tracker → strain observer: the strains at the control points come back."""

import numpy as np
import pytest

from aiko.core.errors import ConfigError
from aiko.devices.camera.pipeline import StrainPipeline, observer_model
from aiko.devices.camera.source import Frame
from aiko.devices.camera.synthetic import Polygon, RodScene
from sim.cosserat import build_model, kinematics, uniform_rod
from sim.cosserat.statics import solve_statics
from tests.aiko.devices.camera import scene as sc

MARKERS = np.linspace(0.025, 0.195, 8)
ROD = uniform_rod(0.2, 0.005, 5e6, 1200.0)  # qL³/EI ≈ 3: a visibly sagging rod (κ up to ~7 1/m)
N = 8
BASE_ALPHA = np.array([0.0, 0.3, 0.0, *sc.BASE_M])  # 0.3 rad nose-down about +y: the rod bends in x–z


@pytest.fixture(scope="module")
def truth():
    """A clamped rod under gravity and a hidden tip load (the table pushing up) — the observer knows gravity only."""
    dense = np.linspace(0.0, 0.2, 61)
    model = build_model(ROD, N, tip_force_n=(0.0, 0.0, 0.03), extra_points_m=tuple(dense) + tuple(MARKERS))
    q0 = np.zeros(model.n_dof)
    q0[0:6] = BASE_ALPHA
    q = solve_statics(model, q0, load_steps=3).q
    p = kinematics(model, q).p
    idx = model.grid.extra_index
    scene = RodScene(p[idx[: len(dense)]], np.full(len(dense), 0.005), p[idx[len(dense) :]], 0.006)
    return q, scene


def pipeline(**kw) -> StrainPipeline:
    return StrainPipeline(sc.tracker(MARKERS), observer_model(ROD, N, MARKERS), MARKERS, BASE_ALPHA, **kw)


def kappa_error(est, q) -> float:
    kappa_true = q[6:].reshape(-1, 6)[:, 1:3]
    return float(np.linalg.norm(est.strain_nodes[:, 1:3] - kappa_true) / np.linalg.norm(kappa_true))


@pytest.mark.parametrize("compliance_m_per_n, bound", [(0.0, 0.06), (1e-3, 0.025)])
def test_observer_on_tracked_markers_recovers_the_strains(truth, compliance_m_per_n, bound):
    """Relative bending-strain error (2-norm over the control points) from one noisy 640×480 frame, markers
    within 0.1 mm (measured 0.025 mm): hard marker constraints (the paper) interpolate the marker noise into
    strain (measured 2.8 %); a marker compliance of 1e-3 m/N filters it (measured 1.2 %). Exact markers give
    1e-6 (tests/sim/cosserat/test_observer.py), so this is the camera's share."""
    q, scene = truth
    assert np.abs(q[6:].reshape(-1, 6)[:, 1]).max() > 3.0  # really bent
    cam, pipe = sc.camera(seed=11), pipeline(marker_compliance_m_per_n=compliance_m_per_n)
    est = pipe.process(Frame(0, 0, cam.render(scene)))
    assert est.markers.visible.all()
    assert 1e3 * np.abs(est.markers.world_m - scene.markers_m).max() < 0.1
    assert kappa_error(est, q) < bound
    np.testing.assert_allclose(est.control_x_m, np.linspace(0, 0.2, N + 1))
    if compliance_m_per_n > 0:
        # the markers' constraint forces carry the hidden 0.03 N tip load, to the force resolution of the camera:
        # marker noise / compliance ≈ 0.02 mm / 1e-3 m/N = 0.02 N (hard constraints: off by 0.17 N in x)
        np.testing.assert_allclose(est.marker_forces_n.sum(axis=0), [0.0, 0.0, 0.03], atol=0.02)


def test_observer_runs_on_the_visible_markers_when_one_is_hidden(truth):
    q, scene = truth
    cam, pipe = sc.camera(seed=12), pipeline()
    frames = [pipe.process(Frame(0, 0, cam.render(scene)))]
    px, _ = cam.project(scene.markers_m[4:5])
    arm = (Polygon(sc.disc_px(px[0], 16.0), (70, 70, 70)),)
    frames.append(pipe.process(Frame(1, 10_000_000, cam.render(scene, foreground_items=arm))))
    assert not frames[1].markers.visible[4] and frames[1].markers.visible.sum() == 7
    assert kappa_error(frames[1], q) < 0.06


def test_too_few_markers_gives_no_strains_and_says_why():
    cam, pipe = sc.camera(), pipeline()
    est = pipe.process(
        Frame(0, 0, cam.render(RodScene(np.zeros((2, 3)) + [0.5, 0, 0.5], np.zeros(2), np.zeros((0, 3)), 0.0)))
    )
    assert est.strain_nodes is None and est.note == "0 markers seen"


def test_pipeline_config_errors():
    with pytest.raises(ConfigError, match="base_alpha must be"):
        StrainPipeline(sc.tracker(MARKERS), observer_model(ROD, N, MARKERS), MARKERS, np.zeros(3))
    with pytest.raises(ConfigError, match="7 marker arc lengths for 8 markers"):
        StrainPipeline(sc.tracker(MARKERS), observer_model(ROD, N, MARKERS), MARKERS[:7], BASE_ALPHA)
