"""Every request of the sensors' protocols and what the emulator does with it, through a UDP socket and a pyserial
reader against ``aiko emulate ft-sensor`` in another process (docs/force_sensor.md, "Every request").

RDT answers no command, so a device refuses one by ignoring it: the stream goes on as before and the next request
is obeyed. The USB DAQ likewise ignores a configuration it cannot take. A test per refused row; the filter, which
the emulator now applies, is checked on the samples."""

import socket
import statistics
import struct
import time

import pytest
import serial

from aiko.devices.force_sensor import daq_serial, rdt

from ._emulator import start_ft_emulator, stop_ft_emulator

pytestmark = pytest.mark.timeout(60)

HEX_HOST, ATI_HOST = "127.0.0.157", "127.0.0.158"
HEX_SCALE, ATI_SCALE = (10_000.0, 100_000.0), (1e6, 1e6)  # counts per N, per N m (the flavours' defaults)


class Rdt:
    """A bare RDT client: 8-byte requests out, 36-byte records in."""

    def __init__(self, address):
        self.address = address
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((address[0], 0))
        self.sock.settimeout(2.0)

    def request(self, command, data=0, header=rdt.RDT_HEADER, raw=None):
        self.sock.sendto(raw if raw is not None else struct.pack(">HHI", header, command, data), self.address)

    def records(self, n):
        out = []
        while len(out) < n:
            out.extend(rdt.decode_records(self.sock.recv(4096)))
        return out

    def drain(self):
        """Discard what has already arrived. Non-blocking, so a stream that never pauses (1 kHz on an idle machine
        leaves no 50 ms gap) cannot keep it reading forever."""
        self.sock.setblocking(False)
        try:
            while True:
                self.sock.recv(4096)
        except BlockingIOError:
            pass
        finally:
            self.sock.settimeout(2.0)

    def rate_hz(self, window_s=1.0):
        """The device's sample rate: sequence numbers over at least a second of receive time (coarse on a busy
        machine, which is why the tests only tell 1000 Hz from 100 Hz)."""
        self.drain()
        first = self.records(1)[0]
        t0 = time.monotonic()
        last = first
        while time.monotonic() - t0 < window_s:
            last = self.records(1)[-1]
        return (last.ft_sequence - first.ft_sequence) / (time.monotonic() - t0)

    def fz(self, scale, n=1):
        return [r.counts[2] / scale for r in self.records(n)]


@pytest.fixture(scope="module")
def hex_box():
    proc, _ = start_ft_emulator("--udp", f"{HEX_HOST}:49152", "--wrench", "0,0,5,0,0,0", "--noise-n", "1.0")
    yield Rdt((HEX_HOST, 49152))
    stop_ft_emulator(proc)


@pytest.fixture  # ATI's bias cannot be undone over RDT: a fresh box per test
def ati_box():
    proc, _ = start_ft_emulator("--udp", f"{ATI_HOST}:49152", "--flavour", "ati", "--wrench", "0,0,5,0,0,0")
    yield Rdt((ATI_HOST, 49152))
    stop_ft_emulator(proc)


def streaming(client, scale):
    client.request(rdt.RdtCommand.START_REALTIME)
    return client.fz(scale, 20)


# RDT requests the device ignores (no reply exists in RDT): each row, then the stream and the next request are fine.
REFUSED_HEX = {
    "unknown command 0x0099": dict(command=0x0099),
    "bad header": dict(command=rdt.RdtCommand.START_REALTIME, header=0x4321),
    "short request": dict(command=0, raw=b"\x12\x34\x00\x02"),
    "bias data neither 0xFF nor 0x00": dict(command=rdt.RdtCommand.SET_BIAS, data=0x42),
    "speed data of no rate": dict(command=rdt.RdtCommand.SET_SPEED, data=0),
    "filter code 7": dict(command=rdt.RdtCommand.SET_FILTER, data=7),
}


@pytest.mark.parametrize("row", sorted(REFUSED_HEX))
def test_a_request_the_hex_box_cannot_take_is_ignored_and_the_next_is_obeyed(hex_box, row):
    streaming(hex_box, HEX_SCALE[0])
    hex_box.request(**REFUSED_HEX[row])
    assert statistics.mean(hex_box.fz(HEX_SCALE[0], 200)) == pytest.approx(5.0, abs=0.3)  # unchanged: 5 N, no bias
    hex_box.request(rdt.RdtCommand.STOP_STREAMING)
    hex_box.drain()
    hex_box.request(rdt.RdtCommand.START_REALTIME, 10)  # the next request: 10 samples, then the box stops
    assert len(hex_box.records(10)) == 10


@pytest.mark.parametrize("command", [rdt.RdtCommand.SET_SPEED, rdt.RdtCommand.SET_FILTER])
def test_the_ati_box_ignores_the_etherdaq_commands(ati_box, command):
    streaming(ati_box, ATI_SCALE[0])
    ati_box.request(command, 10 if command == rdt.RdtCommand.SET_SPEED else 6)  # 100 Hz; 1.5 Hz filter
    assert ati_box.rate_hz() > 400  # still 1000 Hz, not 100
    assert ati_box.fz(ATI_SCALE[0], 5) == pytest.approx([5.0] * 5)  # unfiltered
    ati_box.request(rdt.RdtCommand.SET_BIAS)  # the next request is obeyed: ATI's bias takes the current load
    time.sleep(0.05)
    ati_box.drain()
    assert ati_box.fz(ATI_SCALE[0], 5) == pytest.approx([0.0] * 5, abs=1e-6)
    ati_box.request(rdt.RdtCommand.STOP_STREAMING)


def test_the_hex_filter_low_passes_the_samples(hex_box):
    streaming(hex_box, HEX_SCALE[0])
    raw = hex_box.fz(HEX_SCALE[0], 1000)
    hex_box.request(rdt.RdtCommand.SET_FILTER, 4)  # 15 Hz
    time.sleep(0.1)
    hex_box.drain()
    filtered = hex_box.fz(HEX_SCALE[0], 1000)
    hex_box.request(rdt.RdtCommand.SET_FILTER, 0)
    # a first-order 15 Hz low-pass at 1 kHz keeps sqrt(a / (2 - a)) = 0.22 of white noise's deviation (a = 0.090)
    assert statistics.stdev(filtered) / statistics.stdev(raw) == pytest.approx(0.22, abs=0.06)
    assert statistics.mean(filtered) == pytest.approx(5.0, abs=0.1)
    hex_box.request(rdt.RdtCommand.STOP_STREAMING)


def test_reset_threshold_latch_and_multi_unit_streaming(hex_box):
    hex_box.request(rdt.RdtCommand.RESET_THRESHOLD_LATCH)  # no thresholds are set: nothing latched, status stays 0
    hex_box.request(rdt.RdtCommand.START_MULTI_UNIT, 5)  # one unit: the real-time records
    records = hex_box.records(5)
    assert len(records) == 5 and {r.status for r in records} == {0}


@pytest.fixture
def daq(tmp_path):
    link = tmp_path / "ttyFT"
    proc, _ = start_ft_emulator("--pty", str(link), "--wrench", "0,0,5,0,0,0", "--noise-n", "1.0")
    port = serial.Serial(str(link), timeout=1.0)
    yield port
    port.close()
    stop_ft_emulator(proc)


def frames(port, n):
    port.reset_input_buffer()
    parser = daq_serial.FrameParser()
    out = []
    while len(out) < n:
        out.extend(parser.feed(port.read(4096)))
    return out


def config(speed=1, filt=0, zero=0, bad_checksum=False):
    data = bytearray(daq_serial.encode_config(daq_serial.DaqConfig(speed, filt, zero)))
    if bad_checksum:
        data[-1] ^= 0xFF
    return bytes(data)


def counter_rate(port, window_s=1.0):
    """Samples per second from the DAQ's counter over at least a second (tells 1000 Hz from 100 Hz on a busy
    machine, no finer)."""
    first = frames(port, 1)[0].counter
    t0 = time.monotonic()
    last = first
    while time.monotonic() - t0 < window_s:
        last = frames(port, 1)[-1].counter
    return ((last - first) % 65536) / (time.monotonic() - t0)


@pytest.mark.parametrize(
    "row",
    ["bad checksum", "speed code 5", "filter code 9", "zero 7", "a data frame sent back", "garbage"],
)
def test_a_configuration_the_daq_cannot_take_is_ignored_and_the_next_is_obeyed(daq, row):
    bad = {
        "bad checksum": config(10, bad_checksum=True),
        "speed code 5": bytes(daq_serial.CONFIG_HEADER) + bytes([5, 0, 0]) + b"\x00\x00",
        "filter code 9": bytes(daq_serial.CONFIG_HEADER) + bytes([10, 9, 0]) + b"\x00\x00",
        "zero 7": bytes(daq_serial.CONFIG_HEADER) + bytes([10, 0, 7]) + b"\x00\x00",
        "a data frame sent back": daq_serial.encode_frame(daq_serial.DaqFrame(1, 0, (0,) * 6)),
        "garbage": b"\x00\xff" * 40,
    }[row]
    if row in ("speed code 5", "filter code 9", "zero 7"):  # a correct checksum over wrong values
        bad = bad[:-2] + struct.pack(">H", daq_serial.checksum(bad[:-2]))
    daq.write(bad)
    time.sleep(0.1)
    assert counter_rate(daq) > 400  # still 1000 Hz
    daq.write(config(10))  # the next configuration is obeyed: 100 Hz
    time.sleep(0.1)
    assert counter_rate(daq) < 250


def test_the_daq_filter_and_zero_are_applied(daq):
    scale = daq_serial.DAQ_PLACEHOLDER_SCALE.counts_per_n
    raw = [f.values[2] / scale for f in frames(daq, 1000)]
    daq.write(config(1, filt=4))  # 15 Hz filter
    time.sleep(0.2)  # 20 time constants: the filter has settled
    filtered = [f.values[2] / scale for f in frames(daq, 1000)]
    assert statistics.stdev(filtered) / statistics.stdev(raw) == pytest.approx(0.22, abs=0.08)
    assert statistics.mean(filtered) == pytest.approx(5.0, abs=0.3)
    # The zero takes the current reading: one filtered sample (sigma 0.22 N), so the zeroed mean is within 1 N of 0
    # but for a 4.5-sigma draw. (Filter and zero in one configuration would zero on the last unfiltered sample,
    # sigma 1 N: a third of such runs would miss 1 N, as one CI run did.)
    daq.write(config(1, filt=4, zero=255))
    time.sleep(0.1)
    zeroed = [f.values[2] / scale for f in frames(daq, 1000)]
    assert abs(statistics.mean(zeroed)) < 1.0
