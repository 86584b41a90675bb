"""What the UDP and serial readers share: a background thread, a bounded sample buffer, counters, bias.

The receive thread does nothing but decode, stamp (time.monotonic_ns) and append, so 1 kHz costs little; the
consumer drains the buffer at its own pace (:meth:`ForceSensorReader.drain`, :meth:`get`). The buffer is bounded
(default 60 s at 1 kHz); when the consumer stops draining, the oldest samples go and ``overflow`` counts them.

Counters (:class:`StreamStats`), each exact and separate:

* ``received``: samples delivered into the buffer.
* ``lost``: device sequence numbers never delivered (gaps in the sequence): samples the link dropped *and*
  samples that arrived corrupt and were rejected (their sequence number is as unknown as their values).
* ``checksum_failures``: serial frames with a valid header and a wrong checksum (rejected, never delivered).
* ``malformed``: UDP datagrams that are not whole records (rejected, never delivered); serial: see garbage_bytes.
* ``out_of_order``: records whose sequence is not newer than the last delivered one (duplicates, reordering).
* ``saturated``: delivered samples flagged as saturated.
* ``overflow``: samples pushed out of the full buffer before the consumer read them.
"""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

from aiko.core.errors import ConfigError
from aiko.devices.force_sensor.errors import SensorTimeout
from aiko.devices.force_sensor.wrench import CountsScale, Wrench

DEFAULT_CAPACITY = 60_000


@dataclass
class StreamStats:
    received: int = 0
    lost: int = 0
    checksum_failures: int = 0
    malformed: int = 0
    out_of_order: int = 0
    saturated: int = 0
    overflow: int = 0
    garbage_bytes: int = 0

    def as_payload(self) -> dict[str, int]:
        return asdict(self)


class ForceSensorReader:
    """Base class: subclasses implement ``_open``, ``_start_device``, ``_receive_loop`` and ``_close``.

    ``saturation_n`` / ``saturation_nm``: the sensor's rated range; a sample whose magnitude on any axis reaches it
    is flagged ``saturated`` (the serial DAQ also sets overload bits, which flag it as well).
    """

    def __init__(
        self,
        scale: CountsScale,
        *,
        capacity: int = DEFAULT_CAPACITY,
        timeout_s: float = 1.0,
        saturation_n: float = float("inf"),
        saturation_nm: float = float("inf"),
    ) -> None:
        if capacity < 1:
            raise ConfigError(f"buffer capacity must be at least 1 sample, got {capacity}")
        if not timeout_s > 0:
            raise ConfigError(f"timeout must be positive, got {timeout_s} s")
        self.scale = scale
        self.timeout_s = timeout_s
        self.saturation_n = saturation_n
        self.saturation_nm = saturation_nm
        self.stats = StreamStats()
        self._buffer: collections.deque[Wrench] = collections.deque(maxlen=capacity)
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._bias = (0.0,) * 6
        self._tare_sum: list[float] | None = None
        self._tare_left = 0
        self._tare_count = 1
        self._tare_done = threading.Event()
        self._last_sequence: int | None = None
        self._latest: Wrench | None = None
        self._error: BaseException | None = None
        self._deadline = 0.0  # of the start: when a silent sensor is reported

    # lifecycle
    def describe(self) -> str:
        """Where the sensor is, for error messages."""
        raise NotImplementedError

    def start(self) -> ForceSensorReader:
        """Open, start the receive thread, ask the device to stream; SensorTimeout if nothing arrives in time."""
        self._open()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"ft-{type(self).__name__}", daemon=True)
        self._thread.start()
        self._deadline = time.monotonic() + self.timeout_s
        self._start_device()
        if not self.wait_for_samples(1, max(0.0, self._deadline - time.monotonic())):
            self.stop()
            raise SensorTimeout(f"no F/T sensor answered at {self.describe()} within {self.timeout_s:g} s")
        return self

    def stop(self) -> None:
        self._stop.set()
        try:
            self._stop_device()
        except OSError:
            pass
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None
        self._close()

    def stop_streaming(self) -> None:
        """Ask the device to stop sending, keeping the receive thread (samples in flight still count)."""
        self._stop_device()

    def __enter__(self) -> ForceSensorReader:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            self._receive_loop()
        except BaseException as exc:  # noqa: BLE001 - kept and re-raised to the consumer
            self._error = exc
            with self._cond:
                self._cond.notify_all()

    # subclass hooks
    def _open(self) -> None:
        raise NotImplementedError

    def _start_device(self) -> None:
        raise NotImplementedError

    def _stop_device(self) -> None:
        raise NotImplementedError

    def _receive_loop(self) -> None:
        raise NotImplementedError

    def _close(self) -> None:
        raise NotImplementedError

    # delivery (receive thread)
    def _accept_sequence(self, sequence: int) -> bool:
        """Count gaps; False for a sequence that is not newer than the last delivered one."""
        last = self._last_sequence
        if last is not None:
            if sequence <= last:
                self.stats.out_of_order += 1
                return False
            self.stats.lost += sequence - last - 1
        self._last_sequence = sequence
        return True

    def _deliver(self, counts: tuple[int, ...], sequence: int, status: int, t_ns: int, overload: bool = False) -> None:
        force, torque = self.scale.to_si(counts)
        raw = (*force, *torque)
        saturated = overload or any(abs(v) >= self.saturation_n for v in force)
        saturated = saturated or any(abs(v) >= self.saturation_nm for v in torque)
        with self._cond:
            if self._tare_sum is not None:
                self._tare_sum = [s + v for s, v in zip(self._tare_sum, raw, strict=True)]
                self._tare_left -= 1
                if self._tare_left == 0:
                    self._bias = tuple(s / self._tare_count for s in self._tare_sum)
                    self._tare_sum = None
                    self._tare_done.set()
            b = self._bias
            wrench = Wrench(
                force_n=(raw[0] - b[0], raw[1] - b[1], raw[2] - b[2]),
                torque_nm=(raw[3] - b[3], raw[4] - b[4], raw[5] - b[5]),
                sequence=sequence,
                t_ns=t_ns,
                status=status,
                saturated=saturated,
            )
            if len(self._buffer) == self._buffer.maxlen:
                self.stats.overflow += 1
            self._buffer.append(wrench)
            self._latest = wrench
            self.stats.received += 1
            if saturated:
                self.stats.saturated += 1
            self._cond.notify_all()

    # consumer side
    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise self._error

    def wait_for_samples(self, n: int, timeout_s: float) -> bool:
        """Wait until at least n samples have been received in total; False on timeout."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self.stats.received < n:
                self._raise_if_failed()
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def drain(self) -> list[Wrench]:
        """Every buffered sample, oldest first; the buffer is empty afterwards."""
        self._raise_if_failed()
        with self._cond:
            out = list(self._buffer)
            self._buffer.clear()
        return out

    def get(self, timeout_s: float | None = None) -> Wrench:
        """The oldest buffered sample, waiting up to timeout_s (default: the reader's timeout)."""
        timeout = self.timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self._buffer:
                self._raise_if_failed()
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SensorTimeout(f"no F/T sample from {self.describe()} within {timeout:g} s")
                self._cond.wait(left)
            return self._buffer.popleft()

    @property
    def latest(self) -> Wrench | None:
        return self._latest

    # bias
    @property
    def bias(self) -> tuple[float, ...]:
        """The software bias subtracted from every sample (Fx Fy Fz in N, Tx Ty Tz in N·m)."""
        return self._bias

    def set_bias(self, bias: tuple[float, ...] | list[float]) -> None:
        if len(bias) != 6:
            raise ConfigError(f"a bias has six values (Fx Fy Fz Tx Ty Tz), got {len(bias)}")
        with self._cond:
            self._bias = tuple(float(v) for v in bias)

    def clear_bias(self) -> None:
        self.set_bias((0.0,) * 6)

    def tare(self, n_samples: int = 100, timeout_s: float | None = None) -> tuple[float, ...]:
        """Software bias: the mean of the next n_samples raw samples becomes the zero. Returns the bias."""
        if n_samples < 1:
            raise ConfigError(f"tare needs at least one sample, got {n_samples}")
        with self._cond:
            self._tare_done.clear()
            self._tare_count = n_samples
            self._tare_left = n_samples
            self._tare_sum = [0.0] * 6
        timeout = timeout_s if timeout_s is not None else self.timeout_s + n_samples / 100.0
        if not self._tare_done.wait(timeout):
            with self._cond:
                self._tare_sum = None
            self._raise_if_failed()
            raise SensorTimeout(f"tare: fewer than {n_samples} samples from {self.describe()} within {timeout:g} s")
        return self._bias

    def device_bias(self, on: bool = True) -> None:
        """Ask the device to bias (zero) itself; subclasses send their protocol's command."""
        raise NotImplementedError
