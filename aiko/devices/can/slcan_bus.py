"""python-can's slcan interface with a buffered reader.

`can.interfaces.slcan.SlcanBus._read` (python-can 4.6) fetches the serial port one byte per call. Ten Aiko
modules at 100 Hz send 2000 frames/s, ~44 000 bytes/s: one pyserial call per byte costs more than a CPU core
here and starves the reference stream. This subclass reads whatever is waiting in one call and splits lines
itself; everything else (commands, parsing, sending) is python-can's own code.
"""

from __future__ import annotations

import serial
from can.interfaces.slcan import slcanBus as SlcanBus

_TERMINATORS = (ord("\r"), ord("\a"))


class BufferedSlcanBus(SlcanBus):
    garbage_lines = 0  # malformed lines from the adapter (or half lines another reader of the port took)

    def _recv_internal(self, timeout):
        # python-can parses the line with int()/bytes.fromhex and lets ValueError escape, which ends the Notifier
        # thread (no more feedback). A second process reading the same port (`aiko can estop`) can take part of
        # a line: such a line is garbage to skip, not a reason to go deaf.
        try:
            return super()._recv_internal(timeout)
        except (ValueError, IndexError):
            self.garbage_lines += 1
            return None, False

    def _read(self, timeout: float | None) -> str | None:
        deadline = serial.Timeout(timeout)
        while True:
            for index, byte in enumerate(self._buffer):
                if byte in _TERMINATORS:
                    line = self._buffer[: index + 1].decode(errors="replace")
                    del self._buffer[: index + 1]
                    return line
            chunk = self.serialPortOrig.read(max(1, self.serialPortOrig.in_waiting))
            if chunk:
                self._buffer.extend(chunk)
                continue
            if deadline.expired():
                return None

    def send(self, msg, timeout: float | None = None) -> None:
        # pyserial 3.5 checks its write timeout *after* a complete os.write and raises SerialTimeoutException
        # when the thread was merely descheduled for longer than the timeout, although every byte went out.
        # A pty or USB-serial write does not block for long, so write without a timeout.
        super().send(msg, None)
