"""`aiko compare`: a run against a copy whose motion capture lags by 120 ms and sits elsewhere on the floor.
The shift is recovered within one mocap sample, the offset within 1 mm; occluded samples are skipped and counted."""

import json
from pathlib import Path

import numpy as np
import pytest

import aiko.robots.aiko.mocap  # noqa: F401
from aiko.analysis.compare import CompareError, compare_logs, sample_track, tracked_point
from aiko.cli import main
from aiko.core.messages import find_channel
from aiko.log import LogReader, McapRecorder
from aiko.robots.aiko.experiment import load_experiment
from aiko.robots.aiko.joints import REFERENCES_CHANNEL
from aiko.robots.aiko.run import RunOptions, record_run
from tests.aiko.robots.aiko.chain_backend import ChainBackend

REPO = Path(__file__).resolve().parents[3]
MOCAP_PERIOD_S = 0.05
OFFSET_M = np.array([0.31, -0.17, 0.0])
ANGLES = ("angle_h_rad", "angle_v_rad", "rate_h_rad_s", "rate_v_rad_s")


@pytest.fixture(scope="module")
def run_a(tmp_path_factory):
    path = tmp_path_factory.mktemp("compare") / "a.mcap"
    overrides = {
        "run.duration_s": 8.0,
        "mocap.source": "simulated",
        "mocap.noise_std_m": 0.0002,
        "mocap.dropout_probability": 0.05,
        "mocap.seed": 4,
    }
    experiment = load_experiment(REPO / "experiments" / "lateral_undulation_isotropic.toml", overrides)
    record_run(experiment, path, RunOptions(backend="kinematic"), backend=ChainBackend())
    return path


def shifted_copy(src, dst, shift_s, offset_m, occlude_every=0, noise_std_m=0.0):
    """Every message of src; /mocap stamped shift_s later, moved by offset_m, every n-th sample occluded,
    independent Gaussian noise added."""
    rng = np.random.default_rng(11)
    reader = LogReader(src)
    shift_ns = round(shift_s * 1e9)
    occluded_added = 0
    k = 0
    schemas = {topic: info.schema_name for topic, info in reader.channel_info().items()}
    with McapRecorder(dst, {"copy_of": str(src)}) as rec:
        for topic, t_ns, payload in reader.iter_all():
            if topic == "/events":
                payload = dict(payload)
                rec.event(payload.pop("kind"), t_ns, **payload)
                continue
            if topic == "/mocap":
                payload = dict(payload)
                p = np.array(payload["position_m"], dtype=float) + offset_m + rng.normal(0, noise_std_m, 3)
                flags = list(payload["occluded"])
                if occlude_every and k % occlude_every == 3 and not flags[0]:
                    p[0] = np.nan
                    flags[0] = True
                    occluded_added += 1
                payload.update(position_m=p, occluded=flags, capture_t_ns=payload["capture_t_ns"] + shift_ns)
                t_ns += shift_ns
                k += 1
            rec.record(find_channel(topic, schemas[topic]), t_ns, payload)
    return occluded_added


@pytest.mark.parametrize("shift_s", [0.12, -0.08, 0.3137])
def test_shift_and_offset_recovered(run_a, tmp_path, shift_s):
    b = tmp_path / "b.mcap"
    shifted_copy(run_a, b, shift_s, OFFSET_M)
    r = compare_logs(run_a, b).result
    assert abs(r["time_offset_s"] - shift_s) < MOCAP_PERIOD_S  # the requirement: within one mocap sample
    assert abs(r["time_offset_s"] - shift_s) < 0.01  # and in fact much better
    np.testing.assert_allclose(r["position_offset_m"], OFFSET_M, atol=1e-3)
    assert r["rms_position_error_m"] < 1e-3
    assert abs(r["distance_ratio"] - 1.0) < 0.02


def test_shift_recovered_through_independent_noise(run_a, tmp_path):
    b = tmp_path / "b.mcap"
    shifted_copy(run_a, b, 0.12, OFFSET_M, occlude_every=7, noise_std_m=0.001)  # 1 mm noise, as a Vicon on a bad day
    r = compare_logs(run_a, b).result
    assert abs(r["time_offset_s"] - 0.12) < MOCAP_PERIOD_S
    np.testing.assert_allclose(r["position_offset_m"], OFFSET_M, atol=2e-3)
    assert 0.5e-3 < r["rms_position_error_m"] < 3e-3  # the noise, not an alignment error


def test_occluded_samples_are_nan_flagged_skipped_and_counted(run_a, tmp_path):
    b = tmp_path / "b.mcap"
    added = shifted_copy(run_a, b, 0.12, OFFSET_M, occlude_every=10)
    track_a, track_b = tracked_point(LogReader(run_a)), tracked_point(LogReader(b))
    assert np.isnan(track_b.position_m[track_b.occluded]).all()
    flagged_a = int(LogReader(run_a).channel("/mocap")["occluded"][:, 0].sum())
    assert flagged_a > 0 and added > 0
    r = compare_logs(run_a, b).result
    assert r["occluded_samples"] == {"a": flagged_a, "b": flagged_a + added}
    assert r["samples_compared"] < len(track_a.t_s) - flagged_a  # B's occlusions removed samples too
    assert abs(r["time_offset_s"] - 0.12) < MOCAP_PERIOD_S
    assert r["rms_position_error_m"] < 1e-3  # an occluded sample never leaked in as a zero


def test_interpolation_never_bridges_an_occlusion():
    from aiko.analysis.compare import Track

    t = np.arange(5) * 0.05
    p = np.column_stack([t, t, t])
    occ = np.array([False, False, True, False, False])
    p[2] = np.nan
    out = sample_track(Track(t, p, occ), np.array([0.025, 0.075, 0.125, 0.175, 0.3]))
    np.testing.assert_array_equal(np.isfinite(out).all(axis=1), [True, False, False, True, False])
    np.testing.assert_allclose(out[3], [0.175] * 3)


def test_cli_json_and_plot(run_a, tmp_path, capsys):
    b = tmp_path / "b.mcap"
    shifted_copy(run_a, b, 0.12, OFFSET_M)
    plot = tmp_path / "cmp.png"
    assert main(["compare", str(run_a), str(b), "--json", "--plot", str(plot)]) == 0
    r = json.loads(capsys.readouterr().out)
    for key in (
        "time_offset_s",
        "distance_ratio",
        "rms_position_error_m",
        "run_a",
        "run_b",
        "occluded_samples",
        "joint_tracking_rms_rad",
    ):
        assert key in r
    assert len(r["joint_tracking_rms_rad"]["a"]["h_rad"]) == 10
    assert r["joint_angle_rms_between_runs_rad"]["h_rad"] == [0.0] * 10  # the copy has identical joints
    assert plot.stat().st_size > 10_000 and plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_log_without_mocap_is_a_one_line_error(tmp_path, capsys):
    path = tmp_path / "x.mcap"
    with McapRecorder(path) as rec:
        rec.record(REFERENCES_CHANNEL, 0, {"t_s": 0.0, **{k: [0.0] * 10 for k in ANGLES}})
    with pytest.raises(CompareError, match="no /mocap"):
        compare_logs(path, path)
    assert main(["compare", str(path), str(path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"body": -1}, "body -1 requested"),  # not Python's "last body"
        ({"body": 1}, "body 1 requested"),
        ({"topic": "/references"}, "not a tracked-point channel"),
    ],
)
def test_a_wrong_body_or_topic_is_a_compare_error(run_a, kwargs, message):
    with pytest.raises(CompareError, match=message):
        compare_logs(run_a, run_a, **kwargs)


def test_yaw_of_the_tracked_body():
    from aiko.analysis.compare import Track, displacement, yaw_rad

    def q_z(a):
        return np.array([np.cos(a / 2), 0, 0, np.sin(a / 2)])

    def q_mul(p, q):
        w1, x1, y1, z1 = p
        w2, x2, y2, z2 = q
        return np.array(
            [
                w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
                w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
                w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
            ]
        )

    pitch = np.array([np.cos(0.15), 0, np.sin(0.15), 0])  # 0.3 rad about y: the x axis tilts, its heading stays
    assert yaw_rad(q_mul(q_z(0.7), pitch)) == pytest.approx(0.7, abs=1e-12)
    angles = np.linspace(0, 4 * np.pi, 200)  # two full turns
    quats = np.array([q_z(a) for a in angles])
    t = np.arange(200) * 0.05
    pos = np.column_stack([np.cos(angles), np.sin(angles), np.zeros(200)])
    track = Track(t, pos, np.zeros(200, bool), "x", quats)
    assert displacement(track)["yaw_change_deg"] == pytest.approx(720.0, abs=1e-9)
