"""python-can's slcan interface with a buffered reader that survives a shared port.

`can.interfaces.slcan.SlcanBus._read` (python-can 4.6) fetches the serial port one byte per call. Ten Aiko
modules at 100 Hz send 2000 frames/s, ~44 000 bytes/s: one pyserial call per byte costs more than a CPU core
here and starves the reference stream. This subclass reads whatever is waiting in one call and splits lines
itself; everything else (commands, parsing, sending) is python-can's own code.

A port shared with another process (``aiko can estop`` on the run's pty or adapter, a terminal left open on it)
splits the incoming bytes between the readers: each gets part of the stream, and a read that the other process
won raises pyserial's ``SerialException: device reports readiness to read but returned no data``. Raised from the
python-can ``Notifier`` thread, that ended reception for the rest of the run: the run then missed the modules'
ESTOP and streamed on until their feedback went stale (issue 26). Here a failed read is counted, logged, and is "no
data this time"; half lines the other reader took are counted as garbage and skipped. A port that really went
away keeps failing: reception then stays silent, the driver's feedback timeout stops the run, and the counters
say why.

Writing never waits for the kernel's tty worker. pyserial's ``write`` ``select()``s the port after every
``os.write``; on a tty (a pty, a USB-serial adapter) that poll first waits, uninterruptibly, until the kernel has
moved the bytes received so far into the line discipline (``n_tty_poll`` → ``tty_buffer_flush_work``), work done by
an unbound kworker at normal priority. On a busy PC that worker waits for a CPU like any other normal task, and the
run's sender at SCHED_FIFO waited with it: ftrace (sched_switch with kernel stacks, issue 26) showed the sender in
state D in ``pselect6 → n_tty_poll → __flush_work`` for 0.45 s during a run beside a test suite and two busy loops,
and the modules' watchdog stopped the run. Here the bytes go out with ``os.write`` on the port's (non-blocking)
descriptor; a full port is retried after a short sleep, never polled.
"""

from __future__ import annotations

import logging
import os
import select
import time
from collections.abc import Iterable
from typing import Any

import can
import serial
from can.exceptions import error_check
from can.interfaces.slcan import slcanBus as SlcanBus

log = logging.getLogger(__name__)

_TERMINATORS = (ord("\r"), ord("\a"))
_ERROR_BACKOFF_S = 0.001  # after a failed read: a port that keeps failing must not spin the receive thread
_LOG_EVERY_S = 1.0  # read errors are logged at most this often (with the count since the last line)
_WRITE_RETRY_S = 0.0005  # a full port (EAGAIN): sleep this long, then write again
_WRITE_GIVE_UP_S = 1.0  # a port that takes nothing for this long: the write fails (the driver counts it, goes on)


_HEX = frozenset(b"0123456789abcdefABCDEF")
_ID_DIGITS = {ord("t"): 3, ord("r"): 3, ord("T"): 8, ord("R"): 8}


def well_formed(line: bytes) -> bool:
    """Whether a line (without its terminator) may be handed on: a frame line ``tIIIL<data>`` / ``TIIIIIIIIL<data>`` /
    ``rIIIL`` / ``RIIIIIIIIL`` of exactly its length (optionally a 4-digit timestamp), all hex; anything else an
    adapter says (``z``, ``Z``, ``V1013``, an empty line) is python-can's business.

    python-can parses a frame line with no length check: a line whose middle another reader of the port took (the
    start of one frame glued to the end of another) would be decoded into a frame neither module sent. The exact
    length refuses almost all of them; the Lawicel format has no checksum, so nothing refuses all (docs/can_hil.md:
    never read one port from two processes for long)."""
    if not line:
        return True
    id_digits = _ID_DIGITS.get(line[0])
    if id_digits is None:
        return True
    if len(line) < 2 + id_digits or not all(c in _HEX for c in line[1:]):
        return False
    dlc = int(line[1 + id_digits : 2 + id_digits], 16)
    if dlc > 8:
        return False
    length = 2 + id_digits + (0 if line[0] in b"rR" else 2 * dlc)
    return len(line) in (length, length + 4)


class BufferedSlcanBus(SlcanBus):
    """See the module docstring. Opening discards what the port holds from before (frames an adapter kept while
    nobody read it: stale, and seconds of them to wade through before the first answer of this run)."""

    garbage_lines = 0  # malformed lines from the adapter (or half lines another reader of the port took)
    read_errors = 0  # reads that failed (another process on the port, a disconnected adapter); never fatal
    _errors_logged = 0
    _last_error_log_s = -float("inf")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.serialPortOrig.reset_input_buffer()
        self._buffer.clear()

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
                    raw = bytes(self._buffer[:index])
                    del self._buffer[: index + 1]
                    if not well_formed(raw):
                        self.garbage_lines += 1
                        break  # look again from the next line
                    return raw.decode(errors="replace") + chr(byte)
            else:
                chunk = self._read_waiting()
                if chunk:
                    self._buffer.extend(chunk)
                    continue
                if deadline.expired():
                    return None

    def _read_waiting(self) -> bytes:
        """What the port holds now (at least one byte, waiting up to the port's timeout); b"" after a failed read.

        On a file descriptor this waits with ``select`` and takes up to 4 kB with one ``os.read``, not with
        pyserial's ``in_waiting`` + ``read``: ``in_waiting`` (TIOCINQ) takes the tty's termios lock for writing,
        which waits for the kernel's tty worker and would make the sender's own ``write`` (which takes it for
        reading) wait behind it (module docstring)."""
        port = self.serialPortOrig
        fd = getattr(port, "fd", None)
        try:
            if not isinstance(fd, int):
                data: bytes = port.read(max(1, port.in_waiting))
                return data
            ready, _, _ = select.select([fd], [], [], port.timeout)
            if not ready:
                return b""
            try:
                data = os.read(fd, 4096)
            except BlockingIOError:
                data = b""
            if not data:  # what pyserial says for the same (another reader took the bytes, or the port went away)
                raise serial.SerialException(
                    "device reports readiness to read but returned no data (device disconnected or multiple access on"
                    " port?)"
                )
            return data
        except (serial.SerialException, OSError) as exc:
            self._read_failed(exc)
            return b""

    def _read_failed(self, exc: Exception) -> None:
        self.read_errors += 1
        now = time.monotonic()
        if now - self._last_error_log_s >= _LOG_EVERY_S:
            new = self.read_errors - self._errors_logged
            log.warning(
                "slcan read failed %d time(s) (%s); reception goes on (is another process reading %s?)",
                new,
                exc,
                getattr(self.serialPortOrig, "port", "the port"),
            )
            self._errors_logged, self._last_error_log_s = self.read_errors, now
        time.sleep(_ERROR_BACKOFF_S)

    _batch: list[str] | None = None  # lines python-can formatted while send_batch collects them

    def send_batch(self, msgs: Iterable[can.Message]) -> None:
        """Several frames in one write to the port (python-can formats each; see ``CanJointDriver._send_all``)."""
        self._batch = []
        try:
            for msg in msgs:
                self.send(msg)
            data = b"".join(line.encode() + self.LINE_TERMINATOR for line in self._batch)
        finally:
            self._batch = None
        self._write_bytes(data)

    def _write(self, string: str) -> None:
        if self._batch is not None:
            self._batch.append(string)
            return
        self._write_bytes(string.encode() + self.LINE_TERMINATOR)

    _unsent = b""  # the rest of a line a full port did not take: it goes out first, so no line is ever cut

    def _write_bytes(self, data: bytes) -> None:
        """All of ``data`` to the port without ``select()`` (module docstring); ``can.CanOperationError`` if the
        port took nothing for `_WRITE_GIVE_UP_S` (what is left of a cut line is kept and sent first next time)."""
        port = self.serialPortOrig
        fd = getattr(port, "fd", None)
        with error_check("Could not write to serial device"):
            if not isinstance(fd, int):  # not a file descriptor (a socket:// or loop:// URL): pyserial's own write
                port.write(data)
                port.flush()
                return
            not_written = self._write_to(fd, self._unsent + data)
            if not not_written:
                port.flush()  # tcdrain: a USB adapter's driver sends what it holds; a pty returns at once
        if not_written:
            raise can.CanOperationError(
                f"the port took nothing for {_WRITE_GIVE_UP_S} s ({not_written} bytes not written)"
            )

    def _write_to(self, fd: int, whole: bytes) -> int:
        """``os.write`` until all of ``whole`` is out (0) or the port took nothing for `_WRITE_GIVE_UP_S` (how many
        bytes were left; the rest of a line cut short becomes `_unsent`)."""
        done, last_progress_s = 0, time.monotonic()
        while done < len(whole):
            try:
                written = os.write(fd, whole[done:])
            except BlockingIOError:
                written = 0
            if written:
                done, last_progress_s = done + written, time.monotonic()
            elif time.monotonic() - last_progress_s > _WRITE_GIVE_UP_S:
                self._unsent = self._rest_of_cut_line(whole, done)
                return len(whole) - done
            else:
                time.sleep(_WRITE_RETRY_S)
        self._unsent = b""
        return 0

    def _rest_of_cut_line(self, whole: bytes, done: int) -> bytes:
        """What must still go out so that the receiver never sees a line cut short: the rest of the line that
        ``whole[:done]`` ends inside (nothing if it ended on a line's end; the lines after it are dropped)."""
        if done == 0 or whole[done - 1 : done] == self.LINE_TERMINATOR:
            return b""
        end = whole.find(self.LINE_TERMINATOR, done)
        return whole[done:] if end < 0 else whole[done : end + 1]

    def send(self, msg, timeout: float | None = None) -> None:
        # pyserial 3.5 checks its write timeout *after* a complete os.write and raises SerialTimeoutException
        # when the thread was merely descheduled for longer than the timeout, although every byte went out.
        # A pty or USB-serial write does not block for long, so write without a timeout.
        super().send(msg, None)


class SharedSlcanBus(BufferedSlcanBus):
    """An slcan port opened beside another process that may be streaming on it (``aiko can params``): python-can
    sends the Lawicel close ``C`` on open (``set_bitrate`` closes, sets, reopens) and on shutdown, which stops
    an adapter forwarding frames for everyone on it. This one never closes the channel: ``Sn`` and ``O`` go out
    (an adapter that is already open answers BEL and stays as it is), and shutdown only closes the file."""

    def close(self) -> None:
        """Never send ``C``: the channel belongs to whoever else uses the adapter as well."""
