"""The serial emulator's buffering: a PC that configured the DAQ (port open) may stall without losing samples;
before any configuration the frames that do not fit in the pty are dropped and counted (no stale backlog)."""

import os
import select
import time

from aiko.devices.force_sensor import daq_serial
from aiko.devices.force_sensor.emulator import FaultConfig, PtyFtServer, SensorModel


def _read_for(fd, seconds):
    """Everything readable within `seconds` (the emulator keeps streaming meanwhile)."""
    data, deadline = b"", time.monotonic() + seconds
    while time.monotonic() < deadline:
        if select.select([fd], [], [], 0.05)[0]:
            data += os.read(fd, 65536)
    return data


def test_a_configured_port_absorbs_a_reader_stall_and_an_idle_one_drops():
    server = PtyFtServer(SensorModel(daq_serial.DAQ_PLACEHOLDER_SCALE), faults=FaultConfig(), stopped=False)
    server.start()
    fd = os.open(server.slave_path, os.O_RDWR | os.O_NOCTTY)
    try:
        time.sleep(1.5)  # nobody configured the DAQ: it cannot queue more than the pty holds (~20 KB, ~0.9 s)
        idle = daq_serial.FrameParser().feed(_read_for(fd, 0.05))
        assert server.counters.tx_overflow > 0 and len(idle) < 1200
        os.write(fd, daq_serial.encode_config(daq_serial.DaqConfig(speed=1)))
        time.sleep(0.1)
        overflow_before = server.counters.tx_overflow
        time.sleep(1.5)  # a reader stall longer than the pty alone absorbs
        frames = daq_serial.FrameParser().feed(_read_for(fd, 0.5))
    finally:
        server.shutdown()
        os.close(fd)
    counters = [f.counter for f in frames]
    assert server.counters.tx_overflow == overflow_before
    assert len(counters) > 1200 and all(b - a == 1 for a, b in zip(counters, counters[1:], strict=False))
