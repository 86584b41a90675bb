"""`aiko emulate ft-sensor`: wrench sources (constant, CSV, NPZ, hook), one-line errors, and the sign convention."""

import socket
import time

import numpy as np
import pytest

from aiko.cli import main
from aiko.core.errors import ConfigError
from aiko.devices.force_sensor import sources
from aiko.devices.force_sensor.emulator import Pacer
from aiko.devices.force_sensor.udp_reader import UdpReader
from tests.aiko.devices.force_sensor._emulator import start_ft_emulator, stop_ft_emulator


def test_csv_and_npz_tables_interpolate_and_hold_their_ends(tmp_path):
    csv_path = tmp_path / "w.csv"
    csv_path.write_text("t_s,fx_n,fy_n,fz_n,tx_nm,ty_nm,tz_nm\n0,0,0,0,0,0,0\n1,10,0,-2,0,0,1\n")
    source = sources.from_file(csv_path)
    assert source(0.5) == (5.0, 0.0, -1.0, 0.0, 0.0, 0.5)
    assert source(-1.0) == (0.0,) * 6 and source(7.0) == (10.0, 0.0, -2.0, 0.0, 0.0, 1.0)
    npz_path = tmp_path / "w.npz"
    np.savez(npz_path, t_s=np.array([0.0, 2.0]), wrench=np.array([[0.0] * 6, [2.0] * 6]))
    assert sources.from_file(npz_path)(1.0) == (1.0,) * 6


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("t_s,fx_n\n0,1\n", r"lacks column\(s\) fy_n"),
        ("t_s,fx_n,fy_n,fz_n,tx_nm,ty_nm,tz_nm\n1,0,0,0,0,0,0\n0,0,0,0,0,0,0\n", "must increase"),
        ("t_s,fx_n,fy_n,fz_n,tx_nm,ty_nm,tz_nm\n0,x,0,0,0,0,0\n", "not a number"),
    ],
)
def test_bad_tables_are_one_line_config_errors(tmp_path, text, message):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        sources.from_file(path)


def test_hook_from_a_file_and_bad_specs(tmp_path):
    hook_file = tmp_path / "rod.py"
    hook_file.write_text(
        "def base_wrench(t):\n    return (1.0, 0, 0, 0, 0, t)\n"
        "def sensor(t):\n    return [-v for v in base_wrench(t)]\n"
    )
    assert tuple(sources.from_hook(f"{hook_file}:sensor")(2.0)) == (-1.0, 0, 0, 0, 0, -2.0)
    for spec in ("nocolon", "aiko.nonexistent_module:f", f"{hook_file}:missing"):
        with pytest.raises(ConfigError):
            sources.from_hook(spec)
    with pytest.raises(ConfigError, match="expected six"):
        sources.parse_wrench("1,2,3")


def test_the_sensor_reads_the_reaction_of_the_simulated_base_wrench(tmp_path):
    """A hook returning minus the rod's base wrench: the reader sees exactly that (sign convention, docs)."""
    hook_file = tmp_path / "rod.py"
    hook_file.write_text(
        "def sensor(t):\n    base = (0.5, -1.0, 4.0, 0.02, 0.0, -0.01)\n    return [-v for v in base]\n"
    )
    proc, _ = start_ft_emulator("--udp", "127.0.16.8:49152", "--wrench-hook", f"{hook_file}:sensor")
    try:
        with UdpReader("127.0.16.8:49152") as reader:
            sample = reader.get(2.0)
            assert sample.as_tuple() == pytest.approx((-0.5, 1.0, -4.0, -0.02, 0.0, 0.01), abs=1e-5)
    finally:
        stop_ft_emulator(proc)


def test_cli_errors_are_one_line_with_status_2(capsys, tmp_path):
    assert main(["emulate", "ft-sensor", "--udp", "127.0.16.9:49152", "--wrench", "1,2"]) == 2
    err = capsys.readouterr().err.strip()
    assert "expected six" in err and "\n" not in err
    assert main(["emulate", "ft-sensor", "--udp", "127.0.16.9:notaport"]) == 2
    assert "HOST:PORT" in capsys.readouterr().err
    busy = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    busy.bind(("127.0.16.9", 0))
    try:
        assert main(["emulate", "ft-sensor", "--udp", f"127.0.16.9:{busy.getsockname()[1]}"]) == 2
        assert "cannot bind UDP" in capsys.readouterr().err
    finally:
        busy.close()
    assert main(["emulate", "ft-sensor", "--pty", str(tmp_path / "no" / "dir" / "tty")]) == 2
    assert "cannot create the pty link" in capsys.readouterr().err
    assert main(["emulate", "ft-sensor", "--udp", "127.0.16.9:49152", "--drop-fraction", "1.5"]) == 2


def test_pacer_deadlines_are_absolute():
    """Sample k is due at t0 + k / rate whatever the wake-up delays were (no accumulated drift)."""
    import threading

    pacer = Pacer(1000.0)
    stop = threading.Event()
    for _ in range(5):
        assert pacer.wait(stop)
    time.sleep(0.02)  # a late wake-up: the next deadlines do not move
    t0 = pacer.t0_ns
    for _ in range(10):
        assert pacer.wait(stop)
    assert pacer.t0_ns == t0 and pacer.k == 15
    assert pacer.late_s() > 0  # the 10 missed samples went out back to back, still behind schedule
    stop.set()
    assert not pacer.wait(stop)
