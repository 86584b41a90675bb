"""The UDP (RDT) reader against `aiko emulate ft-sensor --udp` in its own process, and against a scripted fake."""

import socket
import threading
import time

import pytest

from aiko.core.errors import ConfigError
from aiko.devices.force_sensor import rdt
from aiko.devices.force_sensor.errors import SensorTimeout
from aiko.devices.force_sensor.udp_reader import UdpReader
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


def test_values_and_every_kind_of_bias_round_trip_in_si_units():
    args = ["--udp", "127.0.16.1:49152", "--wrench", ",".join(map(str, W)), "--bias", ",".join(map(str, B))]
    proc, first = start_ft_emulator(*args)
    try:
        assert first == "udp: 127.0.16.1:49152"
        with UdpReader("127.0.16.1:49152") as reader:
            assert reader.wait_for_samples(50, 5.0)
            sample = reader.drain()[-1]
            raw = tuple(w + b for w, b in zip(W, B, strict=True))
            assert close(sample.as_tuple(), raw, 1e-4)  # one count is 1e-4 N / 1e-5 N·m
            reader.set_bias(B)
            assert close(next_sample(reader).as_tuple(), W, 1e-4)
            reader.clear_bias()
            bias = reader.tare(20)
            assert close(bias, raw, 1e-4)
            assert close(next_sample(reader).as_tuple(), (0.0,) * 6, 1e-9)
            reader.clear_bias()
            reader.device_bias(True)  # the Compute Box zeroes itself: 0x0042 with 0xFF
            wait_until(reader, lambda s: close(s.as_tuple(), (0.0,) * 6, 1e-9))
            reader.device_bias(False)
            wait_until(reader, lambda s: close(s.as_tuple(), raw, 1e-4))
            assert reader.stats.lost == 0 and reader.stats.malformed == 0
    finally:
        counters = stop_ft_emulator(proc)
    assert counters["bad_requests"] == 0 and counters["commands"] >= 6


def test_injected_drops_and_corruptions_are_counted_exactly_and_never_delivered():
    drop_every, corrupt_every = 7, 11
    delivered, stats, counters, drops, corrupt = stream_with_faults(
        lambda: UdpReader("127.0.16.2:49152"), ["--udp", "127.0.16.2:49152"], drop_every, corrupt_every
    )
    assert counters["dropped"] == len(drops) and counters["corrupted"] == len(corrupt)
    last = max(delivered)
    assert delivered == sorted(set(delivered)) and delivered[0] == 1
    assert not set(delivered) & (drops | corrupt)  # corrupt samples are never delivered
    assert set(delivered) == set(range(1, last + 1)) - drops - corrupt
    assert stats.lost == len({k for k in drops | corrupt if k < last})
    assert stats.malformed == len(corrupt)  # RDT has no checksum: a corrupted datagram arrives truncated
    assert stats.out_of_order == 0 and stats.checksum_failures == 0


def test_three_seconds_at_1khz_lose_nothing():
    proc, _ = start_ft_emulator("--udp", "127.0.16.3:49152", "--rate", "1000", "--noise-n", "0.05")
    try:
        reader = UdpReader("127.0.16.3:49152").start()
        try:
            time.sleep(3.0)
            reader.stop_streaming()
            samples = reader.drain() + settle(reader)
        finally:
            reader.stop()
    finally:
        counters = stop_ft_emulator(proc)
    assert len(samples) == counters["sent"] >= 2500
    assert reader.stats.lost == 0 and reader.stats.overflow == 0 and reader.stats.malformed == 0
    assert all(b.t_ns >= a.t_ns for a, b in zip(samples, samples[1:], strict=False))


def test_saturation_is_clipped_and_flagged():
    proc, _ = start_ft_emulator("--udp", "127.0.16.4:49152", "--wrench", "0,0,250,0,0,12", "--saturation-n", "200")
    try:
        with UdpReader("127.0.16.4:49152", saturation_n=200.0, saturation_nm=10.0) as reader:
            assert reader.wait_for_samples(10, 5.0)
            sample = reader.drain()[-1]
            assert sample.saturated and sample.force_n[2] == pytest.approx(200.0)
            assert sample.torque_nm[2] == pytest.approx(12.0)  # the emulator's torque range is unlimited
            assert reader.stats.saturated == reader.stats.received
    finally:
        stop_ft_emulator(proc)


def test_no_sensor_is_one_line_error_after_the_timeout():
    reader = UdpReader("127.0.16.5:49152", timeout_s=0.3)
    with pytest.raises(SensorTimeout) as err:
        reader.start()
    assert str(err.value) == "no F/T sensor answered at udp 127.0.16.5:49152 within 0.3 s"


def test_malformed_duplicate_and_reordered_datagrams_are_rejected_and_counted():
    """A scripted sensor: checks the start request the reader sends, then sends good and bad datagrams."""
    sensor = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sensor.bind(("127.0.16.6", 0))
    sensor.settimeout(5.0)
    requests = []

    def record(seq, fz=1):
        return rdt.encode_record(rdt.RdtRecord(seq, seq, 0, (0, 0, fz * 10_000, 0, 0, 0)))

    def script():
        while True:
            packet, peer = sensor.recvfrom(64)
            requests.append(rdt.decode_request(packet))
            if requests[-1].command == rdt.RdtCommand.START_REALTIME:
                break
        for datagram in (
            record(1),
            record(2)[:35],  # truncated
            record(2) + b"\0",  # padded
            b"",  # empty
            record(2),
            record(2),  # duplicate
            record(5),  # 3 and 4 lost
            record(4),  # late: out of order
            record(6) + record(7),  # buffered: two records in one datagram
        ):
            sensor.sendto(datagram, peer)

    thread = threading.Thread(target=script, daemon=True)
    thread.start()
    reader = UdpReader(sensor.getsockname(), rate_hz=1000.0, filter_code=4)
    try:
        reader.start()
        assert reader.wait_for_samples(5, 5.0)
        time.sleep(0.1)
        delivered = [s.sequence for s in reader.drain()]
    finally:
        reader.stop()
        thread.join(5.0)
        sensor.close()
    assert [r.command for r in requests[:3]] == [
        rdt.RdtCommand.SET_SPEED,
        rdt.RdtCommand.SET_FILTER,
        rdt.RdtCommand.START_REALTIME,
    ]
    assert requests[0].data == 1 and requests[1].data == 4
    assert delivered == [1, 2, 5, 6, 7]
    s = reader.stats
    assert (s.malformed, s.out_of_order, s.lost, s.received) == (3, 2, 2, 5)


def test_ati_flavour_scale_bias_and_buffered_streaming():
    proc, _ = start_ft_emulator("--udp", "127.0.16.10:49152", "--flavour", "ati", "--wrench", "1.5,0,-2,0.25,0,0")
    try:
        reader = UdpReader("127.0.16.10:49152", flavour="ati", buffered=True).start()
        try:
            assert reader.scale.counts_per_n == 1_000_000
            assert reader.get(2.0).as_tuple() == pytest.approx((1.5, 0, -2, 0.25, 0, 0), abs=1e-6)
            reader.device_bias(True)  # Net F/T: 0x0042 takes a bias in the box
            wait_until(reader, lambda s: s.as_tuple() == pytest.approx((0.0,) * 6, abs=1e-9))
            with pytest.raises(ConfigError, match="no 'bias off'"):
                reader.device_bias(False)
            assert reader.wait_for_samples(500, 5.0)
            reader.stop_streaming()
            settle(reader)
            stats = reader.stats
        finally:
            reader.stop()
    finally:
        counters = stop_ft_emulator(proc)
    assert stats.lost == 0 and stats.malformed == 0 and stats.out_of_order == 0
    assert stats.received == counters["sent"]


def test_a_finite_sample_count_is_honoured():
    proc, _ = start_ft_emulator("--udp", "127.0.16.11:49152")
    client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    client.bind(("127.0.16.11", 0))
    client.settimeout(0.5)
    try:
        client.sendto(rdt.encode_request(rdt.RdtRequest(rdt.RdtCommand.START_REALTIME, 25)), ("127.0.16.11", 49152))
        sequences = []
        try:
            while True:
                sequences += [r.rdt_sequence for r in rdt.decode_records(client.recv(1024))]
        except TimeoutError:
            pass
    finally:
        client.close()
        counters = stop_ft_emulator(proc)
    assert sequences == list(range(1, 26)) and counters["samples"] == 25
