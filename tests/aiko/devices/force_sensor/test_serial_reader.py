"""The serial (OptoForce USB DAQ) reader over a pty: against `aiko emulate ft-sensor --pty` in its own process,
and against a scripted fake device on a pty this test opens."""

import os
import select
import threading
import time
import tty

import pytest

from aiko.core.errors import ConfigError
from aiko.devices.force_sensor import daq_serial
from aiko.devices.force_sensor.errors import SensorTimeout
from aiko.devices.force_sensor.serial_reader import SerialReader
from tests.aiko.devices.force_sensor._emulator import (
    close,
    next_sample,
    settle,
    start_ft_emulator,
    stop_ft_emulator,
    stream_with_faults,
    wait_until,
)

W = (1.5, -2.25, 10.0, 0.125, -0.5, 0.75)
B = (0.5, 0.25, -3.0, 0.01, 0.02, -0.03)
ONE_COUNT = 0.01  # the DAQ placeholder scale: 100 counts/N, 1000 counts/N·m


def test_values_and_every_kind_of_bias_round_trip_in_si_units(tmp_path):
    link = str(tmp_path / "ttyFT0")
    args = ["--pty", link, "--wrench", ",".join(map(str, W)), "--bias", ",".join(map(str, B))]
    proc, first = start_ft_emulator(*args)
    try:
        assert first.startswith("pty: /dev/") and first.endswith(link) and os.path.islink(link)
        with SerialReader(link) as reader:
            raw = tuple(w + b for w, b in zip(W, B, strict=True))
            assert close(next_sample(reader).as_tuple(), raw, ONE_COUNT / 2 + 1e-9)
            reader.set_bias(B)
            assert close(next_sample(reader).as_tuple(), W, ONE_COUNT / 2 + 1e-9)
            reader.clear_bias()
            assert close(reader.tare(20), raw, ONE_COUNT / 2 + 1e-9)
            assert close(next_sample(reader).as_tuple(), (0.0,) * 6, 1e-9)
            reader.clear_bias()
            reader.device_bias(True)  # the DAQ's zero: configuration with zero = 255
            wait_until(reader, lambda s: close(s.as_tuple(), (0.0,) * 6, 1e-9))
            reader.device_bias(False)
            wait_until(reader, lambda s: close(s.as_tuple(), raw, ONE_COUNT))
            assert reader.stats.checksum_failures == 0 and reader.stats.lost == 0
    finally:
        counters = stop_ft_emulator(proc)
    assert not os.path.lexists(link)
    assert counters["bad_requests"] == 0 and counters["commands"] >= 3


def test_injected_drops_and_bad_checksums_are_counted_exactly_and_never_delivered(tmp_path):
    link = str(tmp_path / "ttyFT1")
    drop_every, corrupt_every = 13, 5
    delivered, stats, counters, drops, corrupt = stream_with_faults(
        lambda: SerialReader(link), ["--pty", link, "--stopped"], drop_every, corrupt_every
    )
    assert counters["dropped"] == len(drops) and counters["corrupted"] == len(corrupt)
    assert counters["tx_overflow"] == 0
    last = max(delivered)
    assert delivered[0] == 1 and delivered == sorted(set(delivered))
    assert not set(delivered) & (drops | corrupt)
    assert set(delivered) == set(range(1, last + 1)) - drops - corrupt
    assert stats.lost == len({k for k in drops | corrupt if k < last})
    assert stats.checksum_failures == len(corrupt)  # every corrupt frame seen, also after the last good one
    assert stats.garbage_bytes == 0 and stats.malformed == 0


def test_three_seconds_at_1khz_lose_nothing(tmp_path):
    link = str(tmp_path / "ttyFT2")
    proc, _ = start_ft_emulator("--pty", link, "--stopped", "--noise-n", "0.05", "--noise-nm", "0.001")
    try:
        reader = SerialReader(link, rate_hz=1000.0).start()
        try:
            time.sleep(3.0)
            reader.stop_streaming()
            samples = reader.drain() + settle(reader)
        finally:
            reader.stop()
    finally:
        counters = stop_ft_emulator(proc)
    assert len(samples) == counters["sent"] >= 2500
    s = reader.stats
    assert (s.lost, s.checksum_failures, s.overflow, s.garbage_bytes) == (0, 0, 0, 0)


def test_saturation_sets_the_daq_overload_bits(tmp_path):
    link = str(tmp_path / "ttyFT3")
    proc, _ = start_ft_emulator("--pty", link, "--wrench", "0,0,-250,0,0,0", "--saturation-n", "200")
    try:
        with SerialReader(link) as reader:  # no range given to the reader: the status word says it
            sample = next_sample(reader)
            assert sample.saturated and sample.force_n[2] == pytest.approx(-200.0)
            assert daq_serial.overloaded_axes(sample.status) == (False, False, True, False, False, False)
    finally:
        stop_ft_emulator(proc)


def test_a_silent_port_is_one_line_error_after_the_timeout():
    master, slave = os.openpty()
    try:
        path = os.ttyname(slave)
        with pytest.raises(SensorTimeout) as err:
            SerialReader(path, timeout_s=0.3).start()
        assert str(err.value) == f"no F/T sensor answered at serial {path} within 0.3 s"
    finally:
        os.close(master)
        os.close(slave)
    with pytest.raises(ConfigError, match="cannot open serial port /nonexistent/tty"):
        SerialReader("/nonexistent/tty").start()
    with pytest.raises(ConfigError, match="1000, 333, 100, 30 or 10 Hz"):
        SerialReader(path, rate_hz=500)


def test_garbage_bad_checksums_and_foreign_frames_are_rejected_and_counted():
    """A scripted DAQ: checks the configuration the reader sends, then writes good and bad bytes."""
    master, slave = os.openpty()
    tty.setraw(slave)
    path = os.ttyname(slave)
    configs = []

    def frame(counter, values=(0, 0, 100, 0, 0, 0)):
        return daq_serial.encode_frame(daq_serial.DaqFrame(counter, 0, values))

    def script():
        parser = daq_serial.ConfigParser()
        while not configs:
            if select.select([master], [], [], 5.0)[0]:
                configs.extend(parser.feed(os.read(master, 64)))
            else:
                return
        bad = frame(2)[:-1] + bytes([frame(2)[-1] ^ 0xFF])
        foreign = daq_serial.encode_frame(daq_serial.DaqFrame(3, 0, (1, 2, 3)))  # a 3-axis sensor's frame
        os.write(master, b"\x00\x13garbage" + frame(1) + bad + foreign + frame(3)[:10])
        time.sleep(0.05)
        os.write(master, frame(3)[10:] + frame(6) + frame(5) + frame(7))

    thread = threading.Thread(target=script, daemon=True)
    thread.start()
    reader = SerialReader(path, filter_code=4)
    try:
        reader.start()
        assert reader.wait_for_samples(4, 5.0)
        time.sleep(0.1)
        delivered = [s.sequence for s in reader.drain()]
    finally:
        reader.stop()
        thread.join(5.0)
        os.close(master)
        os.close(slave)
    assert configs[0] == daq_serial.DaqConfig(speed=1, filter=4, zero=0)
    assert delivered == [1, 3, 6, 7]
    s = reader.stats
    assert (s.checksum_failures, s.malformed, s.out_of_order, s.lost, s.garbage_bytes) == (
        1,
        1,
        1,
        3,
        9,
    )  # 2, 4 and 5 never delivered (5 came late)
