"""The F/T sensor in the bench loop: settings, the sensor-frame sign convention, and a HIL run whose logged sensor
force (RDT over UDP from the emulator inside the plant's process) matches the plant's base wrench."""

import numpy as np
import pytest

from aiko.core.errors import ConfigError
from aiko.log.reader import read_log
from aiko.robots.rod_bench.bench_experiment import load_bench_experiment
from aiko.robots.rod_bench.bench_run import OBSERVATION, record_bench_run
from aiko.robots.rod_bench.compare import compare_logs
from aiko.robots.rod_bench.ft_sensor import WRENCH, sensor_wrench, world_force
from aiko.robots.rod_bench.mount import Mount
from aiko.robots.rod_bench.replay import replay_bench_log
from aiko.robots.rod_bench.sensors import bench_sensors

from .bench_files import write_experiment

FT = '\n[ft_sensor]\ntransport = "udp"\nrate_hz = 500.0\nnoise_n = 0.005\n'


def steady_rows(
    t_obs_ns: np.ndarray, base_force_n: np.ndarray, index: np.ndarray, tolerance_n: float = 0.01
) -> np.ndarray:
    """Which sensor rows were read while the plant's force was steady: every observation from 0.3 s before the one
    matched to the row to the one after it agrees with it within ``tolerance_n``. Only there can the sensor's newest
    sample (as old as the transport made it: a loaded machine's pty has held bytes for 0.3 s) be compared with the
    arm's (RTDE, 50 Hz). On a loaded machine a stalled tick can leave the rod moving after the press: once (make test
    beside two busy loops, 2026-11-30) a row at t >= 0.3 s read 4.0 N on the plant's side and 2.0 N on the sensor's,
    where the steady hold is 2.25 N."""
    t_s = (np.asarray(t_obs_ns) - t_obs_ns[0]) * 1e-9
    steady = np.zeros(len(index), dtype=bool)
    for row, j in enumerate(index):
        window = (t_s >= t_s[j] - 0.3 - 1e-9) & (np.arange(len(t_s)) <= j + 1)
        steady[row] = np.max(np.abs(base_force_n[window] - base_force_n[j])) <= tolerance_n
    return steady


def test_ft_sensor_table_is_strict(tmp_path):
    for extra, match in (
        ('\n[ft_sensor]\ntransport = "can"\n', "ft_sensor.transport"),
        ('\n[ft_sensor]\naddress = "sensor.local:49152"\n', "ft_sensor.address: expected IP:PORT"),
        ('\n[ft_sensor]\naddress = "192.168.1.1:70000"\n', "ft_sensor.address"),
        ("\n[ft_sensor]\nrate_hz = 5000.0\n", "ft_sensor.rate_hz"),
        ("\n[ft_sensor]\ncounts_per_n = 100.0\n", "counts_per_n and counts_per_nm go together"),
        ('\n[ft_sensor]\ntransport = "serial"\naddress = "192.168.1.1:49152"\n', "a serial sensor takes port"),
        ("\n[ft_sensor]\nbias = true\n", "ft_sensor.bias: unknown key"),
        ('\n[ft_sensor]\ntransport = "serial"\nrate_hz = 500.0\n', "the serial DAQ streams at 1000, 333, 100, 30"),
    ):
        with pytest.raises(ConfigError, match=match):
            load_bench_experiment(write_experiment(tmp_path, extra))
    ok = load_bench_experiment(write_experiment(tmp_path, '\n[ft_sensor]\naddress = "192.168.1.1:49153"\n'))
    assert ok.ft_sensor is not None and ok.ft_sensor.udp_port == 49153 and ok.ft_sensor.transport == "udp"


def test_real_backend_needs_the_sensor_address_and_sim_has_no_sensor(tmp_path):
    experiment = load_bench_experiment(write_experiment(tmp_path, FT))
    with pytest.raises(ConfigError, match="ft_sensor.address .* required for --backend real"):
        bench_sensors(experiment, "real", None)
    assert bench_sensors(experiment, "sim", None) == []


def test_the_sensor_reads_minus_the_base_wrench_in_the_flange_frame():
    """The rod hangs from a flange pointing down (rod axis along the flange's z): the base holds the rod up (its
    force on the rod is +z in the world); the sensor feels the rod pulling away from it, along the flange's +z."""
    from aiko.robots.rod_bench.settings import UR3Settings

    mount = Mount.from_settings(UR3Settings())
    alpha = np.array([0.0, np.pi / 2, 0.0, 0.0, 0.0, 0.3])  # rod axis (local x) pointing down (world -z)
    flange = mount.flange_pose(alpha)
    base = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.5])  # [moment; force]: 0.5 N up on the rod
    reading = sensor_wrench(mount, flange, base)
    np.testing.assert_allclose(reading[0:3], [0.0, 0.0, 0.5], atol=1e-12)  # pulled out of the flange, along +z
    np.testing.assert_allclose(world_force(mount, flange, reading[0:3]), [0.0, 0.0, -0.5], atol=1e-12)
    moment = np.array([0.0, 0.02, 0.0, 0.0, 0.0, 0.0])
    rotated = sensor_wrench(mount, flange, moment)[3:6]
    assert np.linalg.norm(rotated) == pytest.approx(0.02) and np.all(np.isfinite(rotated))


pytest.importorskip("rtde_control")


def test_hil_logs_the_sensor_and_its_force_is_the_plants_reaction(tmp_path):
    host = "127.0.0.81"
    # the sensor mounted 5 cm behind the rod's base, turned 90° about the tool axis: the plant feeds the emulated
    # sensor what it reads there, and the bench moves it back to the flange frame at the base (ft_frame)
    path = write_experiment(tmp_path, FT + "offset_m = [0.0, 0.0, -0.05]\nrotation_deg = [0.0, 0.0, 90.0]\n")
    # the press, then a hold long enough for samples to compare even when a loaded machine stalls the loop a while
    path.write_text(path.read_text().replace("duration_s = 0.2", "duration_s = 1.0"))
    experiment = load_bench_experiment(path)
    out = tmp_path / "hil-ft.mcap"
    summary = record_bench_run(experiment, out, "hil", host=host)
    ft = summary["sensors"]["ft_sensor"]
    assert ft["where"] == f"udp {host}:49152"
    assert ft["received"] > 50 and ft["lost"] == 0 and ft["malformed"] == 0
    reader = read_log(out)
    assert reader.has(WRENCH)
    wrench = reader.channel(WRENCH)
    obs = reader.channel(OBSERVATION)
    assert np.all(np.diff(np.asarray(wrench["sequence"])) > 0)
    force, raw = np.asarray(wrench["force_n"]), np.asarray(wrench["sensor_force_n"])
    np.testing.assert_allclose(raw, np.column_stack([force[:, 1], -force[:, 0], force[:, 2]]), atol=1e-9)
    assert np.max(np.abs(raw[:, 0] - force[:, 0])) > 0.1  # the sensor's own axes are not the flange's
    # the sensor's force, in the world frame, against the plant's base force (through RTDE) at the same time
    mount = Mount.from_settings(experiment.ur3)
    t_obs = np.asarray(obs.t_ns)
    j = np.clip(np.searchsorted(t_obs, np.asarray(wrench.t_ns)), 0, len(t_obs) - 1)
    poses = np.asarray(obs["flange_pose"])[j]
    sensed = np.array([world_force(mount, p, f) for p, f in zip(poses, np.asarray(wrench["force_n"]), strict=True)])
    base = np.asarray(obs["base_force_n"])[j]
    assert np.max(np.abs(base[:, 2])) > 0.3  # the rod's weight is on the flange
    # minus sign: the sensor feels the reaction (with a plus sign the difference would be twice the force, > 1 N).
    # Compared while the arm holds (t >= 0.3 s) and the plant's force is steady: during the press the rod's force
    # alternates from one controller tick to the next, and the two paths (RDT at 500 Hz, RTDE sampled at 50 Hz)
    # pick different ticks
    t_s = (np.asarray(wrench.t_ns) - reader.metadata["aiko.bench"]["clock_start_ns"]) * 1e-9
    hold = (t_s >= 0.3) & steady_rows(t_obs, np.asarray(obs["base_force_n"]), j)
    assert hold.sum() >= 3
    np.testing.assert_allclose(sensed[hold], -base[hold], atol=0.02)  # the emulated noise: 0.005 N per axis
    # the bench compare takes the sensor's normal force; against the replay's it agrees as the arm's does
    replay = tmp_path / "replay.mcap"
    replay_bench_log(out, replay)
    by_sensor = compare_logs(out, replay, force_a="ft").summary["normal_force_error_percent"]
    by_arm = compare_logs(out, replay).summary["normal_force_error_percent"]
    assert by_sensor < 15.0 and abs(by_sensor - by_arm) < 5.0


def test_hil_reads_the_serial_daq_on_a_pty_fed_by_the_plant(tmp_path):
    """`transport = "serial"` in HIL: the plant's process serves the USB DAQ's serial protocol on a pseudo-terminal
    (linked at a path of the run's host), the bench reads it with the real pyserial reader: the same reaction."""
    host = "127.0.0.83"
    serial = (
        '\n[ft_sensor]\ntransport = "serial"\nrate_hz = 1000.0\nnoise_n = 0.005\n'
        "counts_per_n = 1000.0\ncounts_per_nm = 10000.0\n"  # int16 counts: ±32.7 N, 1 mN steps
        # The arm's force limit at its maximum: this test is about the sensor's path. Once (make test on a fresh
        # clone beside a suite at load ~4, 2026-11-29) the arm read 41.6 N after a 50 ms PC stall at t = 0.11 s and
        # the 30 N default stopped it; a stall injected in the loop does not reproduce that force (5.6 N peak with
        # 50-200 ms stalls), so its cause is open. The limit itself is tested in tests/aiko/devices/ur/test_arm.py.
        "\n[ur3]\nforce_max_n = 200.0\n"
    )
    path = write_experiment(tmp_path, serial)
    path.write_text(path.read_text().replace("duration_s = 0.2", "duration_s = 1.0"))
    experiment = load_bench_experiment(path)
    out = tmp_path / "hil-serial.mcap"
    summary = record_bench_run(experiment, out, "hil", host=host)
    ft = summary["sensors"]["ft_sensor"]
    assert ft["where"].startswith("serial ") and ft["where"].endswith(f"aiko-bench-ft-{host}.pty")
    assert ft["received"] > 50 and ft["lost"] == 0 and ft["checksum_failures"] == 0
    reader = read_log(out)
    wrench, obs = reader.channel(WRENCH), reader.channel(OBSERVATION)
    mount = Mount.from_settings(experiment.ur3)
    t_obs = np.asarray(obs.t_ns)
    j = np.clip(np.searchsorted(t_obs, np.asarray(wrench.t_ns)), 0, len(t_obs) - 1)
    poses, base = np.asarray(obs["flange_pose"])[j], np.asarray(obs["base_force_n"])[j]
    sensed = np.array([world_force(mount, p, f) for p, f in zip(poses, np.asarray(wrench["force_n"]), strict=True)])
    t_s = (np.asarray(wrench.t_ns) - reader.metadata["aiko.bench"]["clock_start_ns"]) * 1e-9
    hold = (t_s >= 0.3) & steady_rows(t_obs, np.asarray(obs["base_force_n"]), j)
    assert hold.sum() >= 3 and np.max(np.abs(base[:, 2])) > 0.3
    np.testing.assert_allclose(sensed[hold], -base[hold], atol=0.02)
