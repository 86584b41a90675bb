"""The `real` backend's F/T sensor path of the bench (the reader at the file's address or port), against
`aiko emulate ft-sensor` in its own process: UDP (RDT) with the file's address, serial (USB DAQ) with its port and
the bias taken at the start."""

import time

import pytest

from aiko.robots.rod_bench.bench_experiment import load_bench_experiment
from aiko.robots.rod_bench.sensors import bench_sensors
from tests.aiko.devices.force_sensor._emulator import start_ft_emulator, stop_ft_emulator

from .bench_files import write_experiment

W = (0.5, -0.25, 2.0, 0.01, -0.02, 0.03)
WRENCH_ARG = ",".join(str(v) for v in W)


def _sample_after(task, wait_s=0.3):
    time.sleep(wait_s)
    return task.sample(0.0)


def test_real_udp_sensor_at_the_files_address(tmp_path):
    proc, first = start_ft_emulator("--udp", "127.0.0.88:49152", "--wrench", WRENCH_ARG, "--rate", "500")
    try:
        path = write_experiment(tmp_path, '\n[ft_sensor]\naddress = "127.0.0.88:49152"\nrate_hz = 500.0\n')
        (task,) = bench_sensors(load_bench_experiment(path), "real", None)
        task.open()
        try:
            payload = _sample_after(task)
        finally:
            task.close()
        summary = task.summary()
    finally:
        stop_ft_emulator(proc)
    assert payload["samples"] > 20 and payload["force_mean_n"] == pytest.approx(W[0:3], abs=1e-4)
    assert payload["torque_nm"] == pytest.approx(W[3:6], abs=1e-4)
    assert summary["where"] == "udp 127.0.0.88:49152" and summary["lost"] == 0 and summary["bias"] is None


def test_real_serial_sensor_at_the_files_port_with_the_bias_at_start(tmp_path):
    link = tmp_path / "ttyFT"
    proc, first = start_ft_emulator("--pty", str(link), "--wrench", WRENCH_ARG, "--rate", "1000")
    try:
        extra = (
            f'\n[ft_sensor]\ntransport = "serial"\nport = "{link}"\nrate_hz = 1000.0\n'
            "counts_per_n = 100.0\ncounts_per_nm = 1000.0\nbias_at_start = true\nbias_samples = 50\n"
        )
        (task,) = bench_sensors(load_bench_experiment(write_experiment(tmp_path, extra)), "real", None)
        task.open()
        try:
            payload = _sample_after(task)
        finally:
            task.close()
        summary = task.summary()
    finally:
        stop_ft_emulator(proc)
    assert summary["bias"] == pytest.approx(W, abs=0.01)  # the DAQ's counts: 0.01 N, 0.001 N·m
    assert payload["force_mean_n"] == pytest.approx([0.0, 0.0, 0.0], abs=0.011)  # tared
    assert summary["checksum_failures"] == 0 and summary["lost"] == 0


def test_real_sensor_mounted_off_the_rods_base_is_moved_to_the_flange_frame(tmp_path):
    """A HEX 5 cm behind the rod's base, turned 90° about the tool axis: the bench logs the wrench about the rod's
    base in the flange's axes (hand-computed: F = (−Fy, Fx, Fz); τ = (−τy, τx, τz) + (0, 0, −0.05) × F)."""
    proc, first = start_ft_emulator("--udp", "127.0.0.89:49152", "--wrench", WRENCH_ARG, "--rate", "500")
    try:
        extra = (
            '\n[ft_sensor]\naddress = "127.0.0.89:49152"\nrate_hz = 500.0\n'
            "offset_m = [0.0, 0.0, -0.05]\nrotation_deg = [0.0, 0.0, 90.0]\n"
        )
        (task,) = bench_sensors(load_bench_experiment(write_experiment(tmp_path, extra)), "real", None)
        task.open()
        try:
            payload = _sample_after(task)
        finally:
            task.close()
    finally:
        stop_ft_emulator(proc)
    assert payload["sensor_force_n"] == pytest.approx(W[0:3], abs=1e-4)  # the raw reading, as the sensor sent it
    assert payload["force_mean_n"] == pytest.approx([0.25, 0.5, 2.0], abs=1e-4)
    assert payload["torque_mean_nm"] == pytest.approx([0.02 + 0.025, 0.01 - 0.0125, 0.03], abs=1e-4)
