"""Reader for the OptoForce / OnRobot USB DAQ (six-axis, 22-byte frames) over any serial port path (pyserial).

Works on a real /dev/ttyACM*, a pty (the emulator's), or any pyserial URL. At start it discards what the port
had buffered, then sends the configuration command (speed, filter, zero off). The 16-bit sample counter is
unwrapped into a monotonic ``sequence``; gaps count as ``lost``. Frames that are not six-axis are counted as
``malformed`` and dropped: this reader is for a single six-axis sensor.
"""

from __future__ import annotations

import time

import serial

from aiko.core.errors import ConfigError
from aiko.devices.force_sensor import daq_serial
from aiko.devices.force_sensor.reader import ForceSensorReader
from aiko.devices.force_sensor.wrench import CountsScale

_POLL_S = 0.02
_CHUNK = 4096


class SerialReader(ForceSensorReader):
    def __init__(
        self,
        port: str,
        *,
        scale: CountsScale = daq_serial.DAQ_PLACEHOLDER_SCALE,
        rate_hz: float = 1000.0,
        filter_code: int = 0,
        **kwargs,
    ) -> None:
        super().__init__(scale, **kwargs)
        self.port = port
        try:
            self.speed_code = daq_serial.speed_code_for_rate(rate_hz)
        except daq_serial.FrameError as exc:
            raise ConfigError(str(exc)) from None
        if filter_code not in daq_serial.FILTER_CODES_HZ:
            raise ConfigError(f"filter code {filter_code} is not 0..6")
        self.filter_code = filter_code
        self.parser = daq_serial.FrameParser()
        self._serial: serial.Serial | None = None
        self._zero = daq_serial.ZERO_OFF

    def describe(self) -> str:
        return f"serial {self.port}"

    def _open(self) -> None:
        try:
            self._serial = serial.serial_for_url(self.port, baudrate=daq_serial.DAQ_BAUDRATE, timeout=_POLL_S)
        except (serial.SerialException, ValueError) as exc:
            raise ConfigError(f"cannot open serial port {self.port}: {exc}") from None
        self._serial.reset_input_buffer()

    def _send_config(self, speed: int) -> None:
        assert self._serial is not None, "reader not started"
        command = daq_serial.encode_config(daq_serial.DaqConfig(speed, self.filter_code, self._zero))
        self._serial.write(command)
        self._serial.flush()

    def _start_device(self) -> None:
        self._send_config(self.speed_code)

    def _stop_device(self) -> None:
        if self._serial is not None and self._serial.is_open:
            self._send_config(daq_serial.SPEED_STOP)

    def device_bias(self, on: bool = True) -> None:
        """The DAQ's own zero: configuration with zero = 255 (on) or 0 (off), speed and filter unchanged."""
        self._zero = daq_serial.ZERO_ON if on else daq_serial.ZERO_OFF
        self._send_config(self.speed_code)

    def _receive_loop(self) -> None:
        ser = self._serial
        assert ser is not None
        parser = self.parser
        while not self._stop.is_set():
            try:
                chunk = ser.read(max(1, min(ser.in_waiting, _CHUNK)))
            except (serial.SerialException, OSError, TypeError):
                if self._stop.is_set():
                    return
                raise
            if not chunk:
                continue
            t_ns = time.monotonic_ns()
            failures_before = parser.checksum_failures
            frames = parser.feed(chunk)
            self.stats.checksum_failures += parser.checksum_failures - failures_before
            self.stats.garbage_bytes = parser.garbage_bytes
            for frame in frames:
                if len(frame.values) != 6:
                    self.stats.malformed += 1
                    continue
                sequence = self._unwrap(frame.counter)
                if self._accept_sequence(sequence):
                    overload = bool(frame.status & daq_serial.OVERLOAD_MASK)
                    self._deliver(frame.values, sequence, frame.status, t_ns, overload)

    def _unwrap(self, counter: int) -> int:
        last = self._last_sequence
        if last is None:
            return counter
        delta = (counter - last) & 0xFFFF
        if delta >= 0x8000:
            delta -= 1 << 16
        return last + delta

    def _close(self) -> None:
        if self._serial is not None:
            self._serial.close()
            self._serial = None
