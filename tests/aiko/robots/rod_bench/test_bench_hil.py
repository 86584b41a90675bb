"""The HIL bench end to end: the unmodified ur_rtde client (through UR3Arm) against `aiko emulate ur3` in another
process on its own loopback address, with the Cosserat rod of the same experiment as the emulator's plant."""

import time

import numpy as np
import pytest

from aiko.log.reader import read_log
from aiko.robots.rod_bench.bench_experiment import load_bench_experiment
from aiko.robots.rod_bench.bench_run import COMMAND, OBSERVATION, record_bench_run
from aiko.robots.rod_bench.compare import compare_logs
from aiko.robots.rod_bench.replay import replay_bench_log

from .bench_files import write_experiment

pytest.importorskip("rtde_control")

HOST = "127.0.0.47"


def test_hil_run_streams_the_trajectory_to_the_emulated_arm_and_logs_the_rod(tmp_path):
    experiment = load_bench_experiment(write_experiment(tmp_path))
    out = tmp_path / "hil.mcap"
    summary = record_bench_run(experiment, out, "hil", host=HOST)
    assert summary["controller_host"] == HOST and summary["controller_rate_hz"] == 200.0
    assert summary["emulator"]["protective_stops"] == 0  # the emulator ran to its closing counters
    assert summary["side_records_merged"] > 0
    reader = read_log(out)
    for topic in (COMMAND, OBSERVATION, "/sim/rod/centreline", "/sim/rod/base_wrench"):
        assert reader.has(topic), topic
    obs = reader.channel(OBSERVATION)
    assert obs["arm.robot_mode"][0] == 7 and not obs["arm.protective_stopped"].any()
    # the flange followed the 2 mm press (servoL lags a few ms) and the rod's weight hangs on it
    assert obs["base_alpha"][0][5] == pytest.approx(0.1929, abs=1e-3)
    assert obs["base_alpha"][-1][5] == pytest.approx(0.1909, abs=6e-4)
    assert np.max(np.abs(np.asarray(obs["base_force_n"])[:, 2])) > 0.3  # the rod pushes on the flange
    assert summary["rod_started_at_s"] <= 0.0  # mounted while the arm held the start pose
    replay = tmp_path / "replay.mcap"
    replay_bench_log(out, replay)
    result = compare_logs(out, replay)
    # the same rod under the same measured flange poses: close, not identical (the plant sees each tick's pose)
    assert result.summary["strain_error_percent"] < 5.0
    # the rod's base force reached the client as actual_TCP_force (emulator -> RTDE -> UR3Arm -> mount): it agrees
    # with the replay's own base force (a sign or frame error would be ~100 %)
    assert result.summary["normal_force_error_percent"] < 15.0


def test_a_refused_start_still_stops_the_arm_and_ends_the_emulator(tmp_path):
    """The start pose lies outside our workspace box: UR3Arm refuses the approach, the run fails in one line, and
    nothing is left listening on the emulator's address."""
    import socket

    from aiko.devices.ur.arm import UnsafeTarget

    host = "127.0.0.49"
    path = write_experiment(tmp_path, "\n[ur3]\nworkspace_min_m = [-0.45, -0.45, 0.25]\n")
    experiment = load_bench_experiment(path)
    with pytest.raises(UnsafeTarget, match="outside the workspace box"):
        record_bench_run(experiment, tmp_path / "refused.mcap", "hil", host=host)
    with pytest.raises(OSError), socket.create_connection((host, 30004), timeout=1.0):
        pass
    assert read_log(tmp_path / "refused.mcap").run_metadata["backend"] == "hil"  # the log was still closed cleanly


def test_a_stalled_pc_catches_up_along_the_trajectory_and_the_run_goes_on(tmp_path, monkeypatch):
    """The loop stalls 50 ms during the 12.5 mm/s press, under a 50 mm/s TCP limit a lab might set for a soft rod.
    Sending the newest set-point at once implied 62 mm/s and the arm's checks refused it: the run stopped itself
    (measured on the code before). The set-points now replay the missed stretch at twice the trajectory's pace: the
    run completes, the log says how far they lagged and each step stays within the limit."""
    from aiko.robots.rod_bench.backends import arm as arm_backend

    real_read = arm_backend.BenchArmBackend.read
    stalled: list[float] = []

    def read_then_stall_once(self):
        observation = real_read(self)
        if not stalled and observation.t_s >= 0.1:
            stalled.append(observation.t_s)
            time.sleep(0.05)
        return observation

    monkeypatch.setattr(arm_backend.BenchArmBackend, "read", read_then_stall_once)
    path = write_experiment(tmp_path, "\n[ur3]\ntcp_speed_max_m_s = 0.05\n")
    # a hold after the press, so the set-points have caught up by the end even where a loaded machine makes the loop
    # late again after the stall (the run used to end at the press's end, 30 ms of lag still to make up: 2 of 4 runs
    # beside make test and two busy loops, 2026-12-03)
    path.write_text(path.read_text().replace("duration_s = 0.2", "duration_s = 0.4"))
    experiment = load_bench_experiment(path)
    out = tmp_path / "hil-stall.mcap"
    summary = record_bench_run(experiment, out, "hil", host="127.0.0.99")
    # the loop saw the stall as missed deadlines: 4 of the 100 Hz commands on a quiet machine; the run is on the
    # controller's clock, which a loaded machine slows as well, so the 50 ms of wall time can pass as fewer periods
    # there (3, make test on a fresh clone beside two busy loops, 2026-12-03)
    assert stalled and not summary["interrupted"] and summary["deadlines_missed"] >= 1
    # behind by at least a period (0.03 s quiet: the 50 ms gap less the two periods the first set-point after it
    # makes up; 0.02 s seen under load, where the loop's own lateness moves the gap against the command grid)
    assert summary["set_point_lag_max_s"] >= 0.01 - 1e-9
    cmd = read_log(out).channel(COMMAND)
    lag = np.asarray(cmd["target_t_s"]) - np.asarray(cmd["trajectory_t_s"])
    assert lag.max() == pytest.approx(summary["set_point_lag_max_s"], abs=1e-9) and lag[-1] == pytest.approx(0.0)
    step_m = np.linalg.norm(np.diff(np.asarray(cmd["flange_pose"])[:, :3], axis=0), axis=1)
    assert step_m.max() <= 2.0 * 0.0125 * 0.01 * 1.01  # two periods of the press a set-point, at most


def _fifo_granted() -> bool:
    """Whether this user may take SCHED_FIFO (root or CAP_SYS_NICE), probed in a child so this process stays as is."""
    import os
    import subprocess
    import sys

    if not hasattr(os, "sched_setscheduler"):
        return False
    probe = "import os; os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, check=False).returncode == 0


def test_the_emulated_controller_runs_at_the_asked_priority_where_granted(tmp_path):
    """`aiko bench run --backend hil --rt-priority P`: the emulator (its controller ticks step the rod) takes SCHED_FIFO
    P where the system grants it, and says so in the summary; where refused it runs at normal priority and says 0."""
    experiment = load_bench_experiment(write_experiment(tmp_path))
    summary = record_bench_run(experiment, tmp_path / "rt.mcap", "hil", host="127.0.0.160", emulator_rt_priority=3)
    assert summary["emulator"]["rt_priority"] == (3 if _fifo_granted() else 0)
    assert summary["emulator"]["protective_stops"] == 0 and summary["side_records_merged"] > 0
    plain = record_bench_run(experiment, tmp_path / "plain.mcap", "hil", host="127.0.0.160")
    assert plain["emulator"]["rt_priority"] == 0


@pytest.mark.parametrize(
    ("priority", "backend", "message"),
    [(100, "hil", "--rt-priority must lie in 0..99"), (5, "sim", "applies to --backend hil only")],
)
def test_a_priority_out_of_range_or_for_another_backend_is_refused_before_anything_starts(
    tmp_path, priority, backend, message
):
    from aiko.core.errors import ConfigError

    experiment = load_bench_experiment(write_experiment(tmp_path))
    with pytest.raises(ConfigError, match=message):
        record_bench_run(experiment, tmp_path / "x.mcap", backend, emulator_rt_priority=priority)
    assert not (tmp_path / "x.mcap").exists()
