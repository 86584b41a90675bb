"""The device side of the slcan (Lawicel CAN232/CANUSB ASCII) protocol on a pseudo-terminal.

The PC opens the pty's slave path with python-can's ``slcan`` interface (pyserial underneath), exactly as it
would open a USB-CAN adapter's /dev/ttyACM0. Frames from the PC go onto a python-can bus (normally a private
``virtual`` channel shared with the emulator); frames from that bus are written back as ``tIIIL<data>\\r``.
Malformed lines are answered with BEL (0x07) as the Lawicel spec says, and counted.

Hand-written because python-can ships only the host side of slcan; the device side is ~100 lines.
"""

from __future__ import annotations

import logging
import os
import select
import threading
import time
import tty
from collections.abc import Callable

import can

log = logging.getLogger(__name__)

OK = b"\r"
ERROR = b"\x07"
LONG_READ_GAP_S = 0.2  # reported silences on the PC's side of the pty (see SlcanPtyServer.long_read_gaps_s)
_MAX_LINE = 64  # longest valid line: "T" + 8 id + 1 dlc + 16 data + timestamp < 32; longer is garbage
_BITRATE_CODES = {b"S0": 10_000, b"S1": 20_000, b"S2": 50_000, b"S3": 100_000, b"S4": 125_000}
_BITRATE_CODES |= {b"S5": 250_000, b"S6": 500_000, b"S7": 750_000, b"S8": 1_000_000}
_HEX = frozenset(b"0123456789abcdefABCDEF")


def format_frame(msg: can.Message) -> bytes:
    """A received frame in Lawicel notation (no timestamp)."""
    if msg.is_remote_frame:
        head = f"R{msg.arbitration_id:08X}" if msg.is_extended_id else f"r{msg.arbitration_id:03X}"
        return f"{head}{msg.dlc:d}".encode() + OK
    head = f"T{msg.arbitration_id:08X}" if msg.is_extended_id else f"t{msg.arbitration_id:03X}"
    return f"{head}{msg.dlc:d}{bytes(msg.data).hex().upper()}".encode() + OK


def parse_frame(line: bytes) -> can.Message | None:
    """A transmit command (t/T/r/R) as a python-can Message; None if malformed."""
    if not line or line[0:1] not in (b"t", b"T", b"r", b"R") or not all(c in _HEX for c in line[1:]):
        return None
    extended = line[0:1] in (b"T", b"R")
    id_len = 8 if extended else 3
    if len(line) < 1 + id_len + 1:
        return None
    frame_id = int(line[1 : 1 + id_len], 16)
    if frame_id > (0x1FFFFFFF if extended else 0x7FF):
        return None
    dlc = int(line[1 + id_len : 2 + id_len], 16)
    if dlc > 8:
        return None
    remote = line[0:1] in (b"r", b"R")
    payload = line[2 + id_len :]
    if remote:
        if payload:
            return None
        return can.Message(arbitration_id=frame_id, is_extended_id=extended, is_remote_frame=True, dlc=dlc)
    if len(payload) != 2 * dlc:
        return None
    return can.Message(arbitration_id=frame_id, is_extended_id=extended, data=bytes.fromhex(payload.decode()))


class SlcanPtyServer(can.Listener):
    """Serves one pty: a reader thread for the PC's commands, a Notifier for the bus's frames."""

    def __init__(self, bus: can.BusABC, on_garbage: Callable[[int], None] | None = None) -> None:
        self.bus = bus
        self.on_garbage = on_garbage or (lambda n: None)
        self.master_fd, self._slave_fd = os.openpty()
        tty.setraw(self._slave_fd)  # no echo, no CR/LF translation: the line discipline must not touch bytes
        # Writes toward the PC never block: when nobody reads the pty (the PC frozen, a tool that left the channel
        # open and exited) its buffer fills, and an adapter then drops frames; it does not stop handling the PC's
        # commands nor queue minutes of stale feedback for whoever opens the port next.
        os.set_blocking(self.master_fd, False)
        self._unsent = b""  # the rest of a line the pty had no room for: sent before anything new (lines stay whole)
        self.frames_dropped_to_pc = 0
        self.slave_path = os.ttyname(self._slave_fd)
        self.channel_open = False
        self.listen_only = False  # opened with "L": the adapter only listens (a frame to send is refused)
        self.bitrate: int | None = None
        self.frames_from_pc = 0
        self.frames_to_pc = 0
        self.garbage_lines = 0
        # When the PC's bytes reached this process (the wall clock, not the modules' own): the longest silences
        # between two reads that carried data while the channel was open. A watchdog trip with no such silence
        # over the limit was made on this side of the pty (the emulator late), not by the PC or the kernel.
        self.long_read_gaps_s: list[tuple[float, float]] = []  # (gap, monotonic time the gap ended), > 0.2 s
        self._last_read_s: float | None = None
        self._write_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._notifier: can.Notifier | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._read_loop, name="slcan-pty", daemon=True)
        self._thread.start()
        self._notifier = can.Notifier(self.bus, [self], timeout=0.05)

    def stop(self) -> None:
        """can.Listener hook, called by the Notifier when it stops: nothing to do (see `shutdown`)."""

    def shutdown(self) -> None:
        self._stop.set()
        if self._notifier is not None:
            self._notifier.stop(timeout=1.0)
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        for fd in (self.master_fd, self._slave_fd):
            try:
                os.close(fd)
            except OSError:
                pass

    # bus -> PC
    def on_message_received(self, msg: can.Message) -> None:
        if self.channel_open and not msg.is_error_frame:
            if self._write(format_frame(msg)):
                self.frames_to_pc += 1
            else:
                self.frames_dropped_to_pc += 1

    def _write(self, data: bytes) -> bool:
        """Write to the PC without blocking; False if there was no room (the data is dropped, as an adapter's
        overflow drops frames). A line cut short by a full buffer is finished before anything else is sent."""
        with self._write_lock:
            if self._unsent:
                self._unsent = self._unsent[self._write_some(self._unsent) :]
                if self._unsent:
                    return False
            written = self._write_some(data)
            if written == 0:
                return False
            self._unsent = data[written:]
            return True

    def _write_some(self, data: bytes) -> int:
        try:
            return os.write(self.master_fd, data)
        except BlockingIOError:
            return 0
        except OSError as exc:  # PC side gone (no slave open: EIO); keep serving until stopped
            log.debug("pty write failed: %s", exc)
            return len(data)

    # PC -> bus
    def _read_loop(self) -> None:
        buffer = bytearray()
        while not self._stop.is_set():
            self._read_ready(buffer, timeout_s=0.05)
        # Stopping: what the PC wrote before the stop is still in the pty; handle it, so that the counters an
        # emulator prints when it is told to stop count every frame that was sent to it (a loaded machine may not
        # have scheduled this thread since the PC's last write).
        while self._read_ready(buffer, timeout_s=0.0):
            pass

    def _read_ready(self, buffer: bytearray, timeout_s: float) -> bool:
        """Read what the pty holds (waiting up to ``timeout_s``) and handle every complete line; False if nothing."""
        ready, _, _ = select.select([self.master_fd], [], [], timeout_s)
        if not ready:
            return False
        try:
            chunk = os.read(self.master_fd, 4096)
        except OSError:
            return False
        if not chunk:
            return False
        self._note_read(time.monotonic())
        buffer.extend(chunk)
        self._handle_lines(buffer)
        return True

    def _note_read(self, now_s: float) -> None:
        if self.channel_open and self._last_read_s is not None:
            gap_s = now_s - self._last_read_s
            if gap_s > LONG_READ_GAP_S and len(self.long_read_gaps_s) < 1000:
                self.long_read_gaps_s.append((round(gap_s, 4), round(now_s, 4)))
        self._last_read_s = now_s

    def _handle_lines(self, buffer: bytearray) -> None:
        while True:
            end = buffer.find(b"\r")
            if end < 0:
                if len(buffer) > _MAX_LINE:  # a runaway line without terminator: garbage
                    buffer.clear()
                    self._garbage(b"<overlong>")
                break
            line = bytes(buffer[:end]).strip(b"\n")
            del buffer[: end + 1]
            self._write(self.handle_line(line))

    def _garbage(self, line: bytes) -> bytes:
        self.garbage_lines += 1
        self.on_garbage(1)
        log.debug("slcan garbage: %r", line[:40])
        return ERROR

    def handle_line(self, line: bytes) -> bytes:
        """Execute one command line (without its CR) and return the reply bytes."""
        if not line:
            return OK  # an empty line is how hosts flush the adapter's parser
        command = line[0:1]
        if command in (b"t", b"T", b"r", b"R"):
            if not self.channel_open or self.listen_only:
                return ERROR
            msg = parse_frame(line)
            if msg is None:
                return self._garbage(line)
            try:
                self.bus.send(msg)
            except can.CanError:
                return ERROR
            self.frames_from_pc += 1
            return (b"Z" if msg.is_extended_id else b"z") + OK
        if command in (b"O", b"L") and len(line) == 1:
            self.channel_open = True
            self.listen_only = command == b"L"
            return OK
        if command == b"C" and len(line) == 1:
            self.channel_open = self.listen_only = False
            return OK
        if line in _BITRATE_CODES:
            self.bitrate = _BITRATE_CODES[line]
            return OK
        if command == b"s" and len(line) == 5 and all(c in _HEX for c in line[1:]):
            return OK  # BTR0/BTR1 register values: accepted, the emulated bus has no bit timing
        if line == b"V":
            return b"V1013" + OK
        if line == b"v":
            return b"v1013" + OK
        if line == b"N":
            return b"NAIKO" + OK
        if line == b"F":
            return b"F00" + OK
        if line == b"Z0":
            return OK  # timestamps off: what this adapter always does
        if line == b"Z1":
            return ERROR  # timestamps on: not emulated, so refused rather than acknowledged and not done
        return self._garbage(line)
