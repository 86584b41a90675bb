"""Protocol emulators of the F/T sensor: RDT over UDP (HEX Compute Box / EtherDAQ / Net F/T) and the USB DAQ on a pty.

Both stream samples on a monotonic-clock schedule with absolute deadlines (sample k is due at t0 + k / rate, so
late wake-ups never accumulate into drift; a sample missed by a late wake-up is sent at once after it, and only a
stall longer than :data:`REANCHOR_S` re-anchors the schedule, counted in ``reanchors``). Each sample is the wrench
source's value plus the sensor's bias (offset) and Gaussian noise, minus the device's own bias when one was
commanded, clipped at the rated range (saturation) and converted to counts.

The device's low-pass filter (RDT 0x0081 on the HEX / EtherDAQ, the USB DAQ's configuration) is applied as a
first-order low-pass at the code's cut-off frequency (500, 150, 50, 15, 5, 1.5 Hz; code 0: none) on the sensed
wrench: the vendors give the cut-offs, not the filter's order, so the order is ours.

Injectable faults, for the readers' tests: drop every k-th sample or a random fraction (the sequence number
advances, nothing is sent: a lost sample), and corrupt every k-th or a fraction (serial: the checksum is wrong;
UDP, which has no checksum of its own: the datagram is truncated to 35 bytes). The counters say exactly what was
injected, so tests compare them with what the reader counted.
"""

from __future__ import annotations

import logging
import math
import os
import random
import select
import socket
import threading
import time
import tty
from dataclasses import dataclass, field

from aiko.core.errors import ConfigError
from aiko.devices.force_sensor import daq_serial, rdt
from aiko.devices.force_sensor.errors import FrameError
from aiko.devices.force_sensor.sources import WrenchSource, constant
from aiko.devices.force_sensor.wrench import CountsScale

log = logging.getLogger(__name__)

REANCHOR_S = 0.5
_INT16 = (-32768, 32767)
_INT32 = (rdt.INT32_MIN, rdt.INT32_MAX)


@dataclass
class FaultConfig:
    drop_every: int = 0  # drop sample k when k % drop_every == 0 (0 = never)
    drop_fraction: float = 0.0
    corrupt_every: int = 0
    corrupt_fraction: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.drop_every < 0 or self.corrupt_every < 0:
            raise ConfigError("--drop-every / --corrupt-every must be >= 0")
        if not (0.0 <= self.drop_fraction < 1.0 and 0.0 <= self.corrupt_fraction < 1.0):
            raise ConfigError("--drop-fraction / --corrupt-fraction must be in [0, 1)")


@dataclass
class SensorModel:
    """The physical side: wrench source, offset, noise, rated range, and the wire scale."""

    scale: CountsScale
    source: WrenchSource = field(default_factory=lambda: constant((0.0,) * 6))
    bias: tuple[float, ...] = (0.0,) * 6
    noise_n: float = 0.0
    noise_nm: float = 0.0
    saturation_n: float = float("inf")
    saturation_nm: float = float("inf")

    def __post_init__(self) -> None:
        if len(self.bias) != 6:
            raise ConfigError("the emulated bias has six values")
        if self.noise_n < 0 or self.noise_nm < 0:
            raise ConfigError("noise must be >= 0")
        if not (self.saturation_n > 0 and self.saturation_nm > 0):
            raise ConfigError("saturation limits must be positive")


@dataclass
class EmulatorCounters:
    samples: int = 0  # samples produced (sequence numbers used)
    sent: int = 0
    dropped: int = 0  # injected drops
    corrupted: int = 0  # injected corruptions
    saturated: int = 0
    reanchors: int = 0
    commands: int = 0
    bad_requests: int = 0
    tx_overflow: int = 0  # serial: frames dropped because the PC did not read the pty


class SampleGenerator:
    """Sample values and fault decisions, shared by both transports."""

    def __init__(self, model: SensorModel, faults: FaultConfig, count_limits: tuple[int, int]) -> None:
        self.model = model
        self.faults = faults
        self.count_limits = count_limits
        self.device_bias = (0.0,) * 6
        self.last_raw = (0.0,) * 6
        self.filter_cutoff_hz: float | None = None
        self.sample_period_s = 1e-3  # the device's own sample period (the filter runs per sample, at the device rate)
        self._filtered: list[float] | None = None
        self._noise_rng = random.Random(faults.seed + 1)
        self._fault_rng = random.Random(faults.seed)
        self.counters = EmulatorCounters()

    def wrench(self, t_s: float) -> tuple[tuple[int, ...], tuple[bool, ...]]:
        """Counts and per-axis saturation flags of the sample at t_s."""
        m = self.model
        value = m.source(t_s)
        if len(value) != 6:
            raise ConfigError(f"the wrench source returned {len(value)} values, expected 6")
        raw = tuple(float(value[k]) + m.bias[k] + self._noise(m.noise_n if k < 3 else m.noise_nm) for k in range(6))
        raw = self._low_pass(raw)
        self.last_raw = raw
        out = [raw[k] - self.device_bias[k] for k in range(6)]
        flags = []
        for k in range(6):
            limit = m.saturation_n if k < 3 else m.saturation_nm
            flags.append(abs(out[k]) >= limit)
            out[k] = max(-limit, min(limit, out[k]))
        counts = list(m.scale.to_counts(out))
        lo, hi = self.count_limits
        for k in range(6):
            if not lo <= counts[k] <= hi:
                flags[k] = True
                counts[k] = max(lo, min(hi, counts[k]))
        if any(flags):
            self.counters.saturated += 1
        return tuple(counts), tuple(flags)

    def set_filter(self, cutoff_hz: float | None) -> None:
        """The device's filter (None: off); the filter's state starts from the next sample."""
        self.filter_cutoff_hz = cutoff_hz
        self._filtered = None

    def _low_pass(self, x: tuple[float, ...]) -> tuple[float, ...]:
        """One step of the first-order low-pass at the device's sample period (not the wall-clock gap since the
        last sample, which a busy host stretches and bunches)."""
        if self.filter_cutoff_hz is None:
            return x
        if self._filtered is None:
            self._filtered = list(x)
        else:
            a = 1.0 - math.exp(-2.0 * math.pi * self.filter_cutoff_hz * self.sample_period_s)
            self._filtered = [y + a * (xk - y) for y, xk in zip(self._filtered, x, strict=True)]
        return tuple(self._filtered)

    def _noise(self, sigma: float) -> float:
        return self._noise_rng.gauss(0.0, sigma) if sigma else 0.0

    def take_device_bias(self) -> None:
        self.device_bias = self.last_raw

    def clear_device_bias(self) -> None:
        self.device_bias = (0.0,) * 6

    def fault(self, k: int) -> str | None:
        """'drop', 'corrupt' or None for sample number k (1-based)."""
        f = self.faults
        if (f.drop_every and k % f.drop_every == 0) or (f.drop_fraction and self._fault_rng.random() < f.drop_fraction):
            self.counters.dropped += 1
            return "drop"
        if (f.corrupt_every and k % f.corrupt_every == 0) or (
            f.corrupt_fraction and self._fault_rng.random() < f.corrupt_fraction
        ):
            self.counters.corrupted += 1
            return "corrupt"
        return None


class Pacer:
    """Absolute-deadline schedule on time.monotonic_ns: ``wait()`` returns when the next sample is due."""

    def __init__(self, rate_hz: float) -> None:
        self.set_rate(rate_hz)

    def set_rate(self, rate_hz: float) -> None:
        if not 0 < rate_hz <= 10_000:
            raise ConfigError(f"rate must be in (0, 10000] Hz, got {rate_hz:g}")
        self.period_ns = round(1e9 / rate_hz)
        self.t0_ns = time.monotonic_ns()
        self.k = 0

    def wait(self, stop: threading.Event) -> bool:
        """Sleep until sample k is due; False if stop was set. Returns True when the sample should go out."""
        due = self.t0_ns + self.k * self.period_ns
        while True:
            now = time.monotonic_ns()
            left = due - now
            if left <= 0:
                break
            if stop.wait(min(left, 50_000_000) / 1e9):
                return False
        self.k += 1
        return not stop.is_set()

    def late_s(self) -> float:
        return (time.monotonic_ns() - (self.t0_ns + self.k * self.period_ns)) / 1e9

    def reanchor(self) -> None:
        self.t0_ns = time.monotonic_ns()
        self.k = 0


class _StreamingServer:
    """Common thread plumbing: a command thread and a streaming thread."""

    def __init__(self, generator: SampleGenerator, rate_hz: float) -> None:
        self.gen = generator
        self.pacer = Pacer(rate_hz)
        generator.sample_period_s = 1.0 / rate_hz
        self.rate_hz = rate_hz
        self._stop = threading.Event()
        self._streaming = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.t_start_ns = time.monotonic_ns()

    @property
    def counters(self) -> EmulatorCounters:
        return self.gen.counters

    def start(self) -> None:
        self.pacer.reanchor()
        for target, name in ((self._command_loop, "ft-emu-commands"), (self._stream_loop, "ft-emu-stream")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def shutdown(self) -> None:
        self._stop.set()
        self._streaming.set()  # wake the streaming thread
        for thread in self._threads:
            thread.join(timeout=2.0)
        self._close()

    def _stream_loop(self) -> None:
        while not self._stop.is_set():
            if not self._streaming.is_set():
                with self._lock:
                    self._idle()
                self._streaming.wait(0.01)
                continue
            if not self.pacer.wait(self._stop):
                return
            if not self._streaming.is_set():
                continue
            with self._lock:
                if self.pacer.late_s() > REANCHOR_S:
                    self.pacer.reanchor()
                    self.counters.reanchors += 1
                self._emit_one((time.monotonic_ns() - self.t_start_ns) / 1e9)

    def _command_loop(self) -> None:
        raise NotImplementedError

    def _idle(self) -> None:
        """Called about every 10 ms while not streaming."""

    def _emit_one(self, t_s: float) -> None:
        raise NotImplementedError

    def _close(self) -> None:
        raise NotImplementedError


class UdpFtServer(_StreamingServer):
    """RDT server on a UDP address. Streams to whoever sent the last start request."""

    def __init__(
        self,
        address: tuple[str, int],
        model: SensorModel,
        *,
        faults: FaultConfig | None = None,
        rate_hz: float = 1000.0,
        flavour: str = "onrobot",
        buffer_records: int = 10,
    ) -> None:
        super().__init__(SampleGenerator(model, faults or FaultConfig(), _INT32), rate_hz)
        if flavour not in ("onrobot", "ati"):
            raise ConfigError(f"unknown F/T flavour {flavour!r}")
        if not 1 <= buffer_records <= rdt.MAX_RECORDS_PER_DATAGRAM:
            raise ConfigError(f"buffer records must be 1..{rdt.MAX_RECORDS_PER_DATAGRAM}")
        self.flavour = flavour
        self.buffer_records = buffer_records
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
            self.sock.bind(address)
        except OSError as exc:
            self.sock.close()
            raise ConfigError(f"cannot bind UDP {address[0]}:{address[1]}: {exc.strerror}") from None
        self.sock.settimeout(0.1)
        self.address = self.sock.getsockname()
        self._client: tuple[str, int] | None = None
        self._rdt_sequence = 0
        self._ft_sequence = 0
        self._remaining = 0  # samples left in a finite request; 0 = infinite
        self._buffered = False
        self._pending: list[bytes] = []
        self.filter_code = 0

    def _command_loop(self) -> None:
        while not self._stop.is_set():
            try:
                packet, sender = self.sock.recvfrom(64)
            except TimeoutError:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                continue
            try:
                request = rdt.decode_request(packet)
            except FrameError as exc:
                self.counters.bad_requests += 1
                log.debug("bad RDT request from %s: %s", sender, exc)
                continue
            self.counters.commands += 1
            with self._lock:
                self._handle(request, sender)

    def _handle(self, request: rdt.RdtRequest, sender: tuple[str, int]) -> None:
        c = rdt.RdtCommand
        if request.command in (c.START_REALTIME, c.START_BUFFERED, c.START_MULTI_UNIT):
            self._client = sender
            self._rdt_sequence = 0  # the RDT sequence counts the records of this request
            self._remaining = request.data
            self._buffered = request.command == c.START_BUFFERED
            self._pending.clear()
            self.pacer.reanchor()
            self._streaming.set()
        elif request.command == c.STOP_STREAMING:
            self._flush()
            self._streaming.clear()
        elif request.command == c.SET_BIAS:
            if self.flavour == "ati" or request.data == rdt.BIAS_ON:
                self.gen.take_device_bias()
            elif request.data == rdt.BIAS_OFF:
                self.gen.clear_device_bias()
            else:
                self.counters.bad_requests += 1
        elif request.command == c.SET_SPEED and self.flavour == "onrobot":
            try:
                self.pacer.set_rate(rdt.rate_for_speed_data(request.data))
                self.gen.sample_period_s = self.pacer.period_ns / 1e9
            except (FrameError, ConfigError):
                self.counters.bad_requests += 1
        elif request.command == c.SET_FILTER and self.flavour == "onrobot":
            if request.data in rdt.FILTER_CODES_HZ:
                self.filter_code = request.data
                self.gen.set_filter(rdt.FILTER_CODES_HZ[request.data])
            else:
                self.counters.bad_requests += 1
        elif request.command == c.RESET_THRESHOLD_LATCH:
            # Thresholds are set up on the box's web page, never over RDT; none is set here, so none is latched and
            # the reset has nothing to clear (the status word never carries a latch bit), as on a box without any.
            pass
        else:
            self.counters.bad_requests += 1

    def _emit_one(self, t_s: float) -> None:
        counts, _flags = self.gen.wrench(t_s)
        self._rdt_sequence = (self._rdt_sequence + 1) & rdt.UINT32_MAX
        self._ft_sequence = (self._ft_sequence + 1) & rdt.UINT32_MAX
        self.counters.samples += 1
        fault = self.gen.fault(self.counters.samples)
        record = rdt.encode_record(rdt.RdtRecord(self._rdt_sequence, self._ft_sequence, 0, counts))
        if fault == "corrupt":
            self._send(record[:-1])
        elif fault is None:
            if self._buffered:
                self._pending.append(record)
                if len(self._pending) >= self.buffer_records:
                    self._flush()
            else:
                self._send(record)
            self.counters.sent += 1
        if self._remaining:
            self._remaining -= 1
            if self._remaining == 0:
                self._flush()
                self._streaming.clear()

    def _flush(self) -> None:
        if self._pending:
            self._send(b"".join(self._pending))
            self._pending.clear()

    def _send(self, datagram: bytes) -> None:
        if self._client is None:
            return
        try:
            self.sock.sendto(datagram, self._client)
        except OSError as exc:  # no one listening (ICMP) or buffer full: the sample is lost, like on a wire
            log.debug("send failed: %s", exc)

    def _close(self) -> None:
        self.sock.close()


class PtyFtServer(_StreamingServer):
    """The USB DAQ on a pseudo-terminal: streams 22-byte six-axis frames from power-up, obeys configuration."""

    def __init__(
        self,
        model: SensorModel,
        *,
        faults: FaultConfig | None = None,
        rate_hz: float = 1000.0,
        link_path: str | None = None,
        stopped: bool = False,
        backlog_bytes: int = 64 * 1024,
    ) -> None:
        super().__init__(SampleGenerator(model, faults or FaultConfig(), _INT16), rate_hz)
        self.master_fd, self._slave_fd = os.openpty()
        tty.setraw(self._slave_fd)  # no echo, no CR/LF translation: the line discipline must not touch bytes
        os.set_blocking(self.master_fd, False)
        self.slave_path = os.ttyname(self._slave_fd)
        self.link_path = link_path
        if link_path:
            try:
                if os.path.lexists(link_path):
                    os.unlink(link_path)
                os.symlink(self.slave_path, link_path)
            except OSError as exc:
                self._close()
                raise ConfigError(f"cannot create the pty link {link_path}: {exc.strerror}") from None
        self.parser = daq_serial.ConfigParser()
        self._counter = 0
        self._pending = bytearray()
        self.backlog_bytes = backlog_bytes
        self._host_active = False
        self.filter_code = 0
        if not stopped:  # the DAQ streams from power-up; ``stopped``: its last configuration was speed 0
            self._streaming.set()

    def _command_loop(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self.master_fd], [], [], 0.1)
            if not ready:
                continue
            try:
                chunk = os.read(self.master_fd, 4096)
            except BlockingIOError:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                time.sleep(0.05)  # EIO while no one has the slave open
                continue
            bad_before = self.parser.bad_commands
            configs = self.parser.feed(chunk)
            self.counters.bad_requests += self.parser.bad_commands - bad_before
            for config in configs:
                self.counters.commands += 1
                with self._lock:
                    self._apply(config)

    def _apply(self, config: daq_serial.DaqConfig) -> None:
        self._host_active = True
        if config.filter != self.filter_code:
            self.gen.set_filter(daq_serial.FILTER_CODES_HZ[config.filter])
        self.filter_code = config.filter
        if config.zero == daq_serial.ZERO_ON:
            self.gen.take_device_bias()
        else:
            self.gen.clear_device_bias()
        if config.speed == daq_serial.SPEED_STOP:
            self._streaming.clear()
        else:
            new_rate = daq_serial.SPEED_CODES_HZ[config.speed]
            if abs(1e9 / new_rate - self.pacer.period_ns) > 1:
                self.pacer.set_rate(new_rate)
                self.gen.sample_period_s = self.pacer.period_ns / 1e9
            if not self._streaming.is_set():
                self.pacer.reanchor()
                self._streaming.set()

    def _emit_one(self, t_s: float) -> None:
        counts, flags = self.gen.wrench(t_s)
        self._counter = (self._counter + 1) & 0xFFFF
        self.counters.samples += 1
        fault = self.gen.fault(self.counters.samples)
        if fault == "drop":
            return
        status = daq_serial.overload_bits(flags)
        frame = daq_serial.encode_frame(daq_serial.DaqFrame(self._counter, status, counts))
        if fault == "corrupt":
            frame = frame[:-1] + bytes([frame[-1] ^ 0x5A])
        if not self._write(frame):
            self.counters.tx_overflow += 1
        elif fault is None:
            self.counters.sent += 1

    def _write(self, frame: bytes) -> bool:
        """Queue a whole frame and write what the pty takes; False (frame dropped) when the backlog is full.

        A Linux pty holds about 20 KB (measured: ~940 frames, 0.94 s at 1 kHz); an open USB CDC port is backed
        by the host driver's buffers too. The backlog models those: once a PC has configured the DAQ (so it has
        the port open), up to ``backlog_bytes`` wait here. Before that, as a device whose host is not reading,
        frames that do not fit in the pty are dropped, so a reader that opens the port later gets no stale backlog.
        """
        limit = self.backlog_bytes if self._host_active else len(frame)
        dropped = len(self._pending) + len(frame) > limit
        if not dropped:
            self._pending += frame
        try:
            n = os.write(self.master_fd, self._pending)
            del self._pending[:n]
        except (BlockingIOError, OSError):
            pass
        return not dropped

    def _idle(self) -> None:
        if self._pending:  # a stopped DAQ still delivers what it had queued
            try:
                del self._pending[: os.write(self.master_fd, self._pending)]
            except (BlockingIOError, OSError):
                pass

    def _close(self) -> None:
        if self.link_path and os.path.islink(self.link_path):
            try:
                os.unlink(self.link_path)
            except OSError:
                pass
        for fd in (self.master_fd, self._slave_fd):
            try:
                os.close(fd)
            except OSError:
                pass
