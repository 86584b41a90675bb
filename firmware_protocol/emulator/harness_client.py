"""The client of the AVR simulator harness (`firmware_sim/`, a separate GPL-3 program built on simavr).

The harness runs N ATmega128 cores with the joint-module firmware, their boards and one CAN bus; this package is
MIT and never links simavr: it starts the harness as a process and speaks its stepping protocol over a pipe
(``firmware_sim/src/protocol.h`` is the contract; this module mirrors it). Times are cycles of the 16 MHz cores.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CPU_HZ = 16_000_000
EEPROM_BYTES = 53
ID_EXTENDED = 0x8000_0000
ID_REMOTE = 0x4000_0000
FLAG_BRAKE_H, FLAG_BRAKE_V, FLAG_RESET, FLAG_CRASHED = 0x01, 0x02, 0x04, 0x08

_HEADER = struct.Struct("<BI")
_RUN_MODULE = np.dtype([("state", "<f8", (2, 4)), ("flags", "u1"), ("limited", "u1"), ("duty_ppm", "<i4", 2)])
_FRAME_IN = np.dtype([("id", "<u4"), ("dlc", "u1"), ("pad", "u1"), ("data", "u1", 8)])
FRAME_OUT = np.dtype([("cycle", "<u8"), ("id", "<u4"), ("dlc", "u1"), ("module", "u1"), ("data", "u1", 8)])
_STATS_MODULE = np.dtype(
    [("awake_cycles", "<u8"), ("total_cycles", "<u8"), ("max_awake_cycles_per_ms", "<u4"), ("encoder_edges", "<u4"),
     ("frames_sent", "<u4"), ("frames_received", "<u4"), ("resets", "<u4")]
)  # fmt: skip

REPO = Path(__file__).resolve().parents[2]
DEFAULT_HARNESS = REPO / "firmware_sim" / "build" / "aiko-avr-harness"
DEFAULT_FIRMWARE = REPO / "firmware_protocol" / "firmware" / "build" / "aiko_joint_module.elf"


class HarnessError(RuntimeError):
    """The harness refused a request, or is not there (the message says which, and how to build it)."""


def harness_path() -> Path:
    """The harness program: $AIKO_AVR_HARNESS, or firmware_sim/build/aiko-avr-harness of this checkout."""
    return Path(os.environ.get("AIKO_AVR_HARNESS", DEFAULT_HARNESS))


def missing_tools() -> str | None:
    """Why the firmware cannot be built and run here (None if it can): the Debian packages it needs."""
    needed = {"avr-gcc": "gcc-avr avr-libc", "pkg-config": "pkg-config", "cc": "gcc libc6-dev"}  # cc: the harness
    missing = [package for tool, package in needed.items() if shutil.which(tool) is None]
    if not Path("/usr/include/simavr/sim_avr.h").is_file():
        missing.append("simavr libsimavr-dev")
    if not Path("/usr/include/libelf.h").is_file() and not Path("/usr/include/gelf.h").is_file():
        missing.append("libelf-dev")
    if missing:
        return "apt-get install " + " ".join(missing)
    return None


@dataclass
class StepResult:
    cycle: int  # the harness's time after the step
    duty: np.ndarray  # (n, substeps, 2) signed duty averaged over each sub-step, -1..1
    flags: np.ndarray  # (n,) FLAG_* bits
    frames: np.ndarray  # FRAME_OUT records: what the modules sent, in bus order


@dataclass
class RunResult:
    cycle: int
    state: np.ndarray  # (n, 2, 4): gear angle, gear rate, joint angle, joint rate per axis
    flags: np.ndarray  # (n,) FLAG_* bits
    limited: np.ndarray  # (n,) current limit in the last sub-step, bits per axis
    duty: np.ndarray  # (n, 2) of the last sub-step
    driven_axis_periods: int  # controller periods x axes not braked, since the plant was set
    limited_periods: np.ndarray  # (n, 2) of those, current-limited in a sub-step
    frames: np.ndarray  # FRAME_OUT records


@dataclass(frozen=True)
class Symbols:
    module_address: int
    module_size: int
    board_address: int
    board_size: int
    mcp_stats_address: int


class AvrHarness:
    """One harness process: N modules on one bus. ``close()`` (or the context manager) ends it."""

    def __init__(
        self,
        firmware: Path,
        eeproms: list[bytes],
        position_q8: np.ndarray,
        pot_mv: np.ndarray,
        *,
        program: Path | None = None,
    ) -> None:
        program = program or harness_path()
        if not Path(program).is_file():
            raise HarnessError(f"the AVR simulator harness {program} is not built: run `make firmware`")
        if not Path(firmware).is_file():
            raise HarnessError(f"no firmware at {firmware}: run `make firmware`")
        self.n_modules = len(eeproms)
        # its own session: a terminal's Ctrl-C (SIGINT to the foreground process group) reaches only the Python
        # side, which then ends the harness itself (`close`) after reading the modules' last state; if the Python
        # side is killed, the harness reads the end of its input and exits
        self._process = subprocess.Popen(
            [str(program), str(firmware)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0,
            start_new_session=True,
        )  # fmt: skip
        assert self._process.stdin is not None and self._process.stdout is not None  # both are pipes
        self._in = self._process.stdin
        self._out = self._process.stdout
        n = self.n_modules
        # per step: the time and the number of sub-steps, per module (2 positions, 2 pot voltages, the limit
        # flags), the frame count
        self._step_head = struct.Struct("<QB" + "iiHHB" * n + "H")
        self._step_replies: dict[int, struct.Struct] = {}
        payload = bytearray([self.n_modules])
        for i, image in enumerate(eeproms):
            if len(image) != EEPROM_BYTES:
                raise ValueError(f"EEPROM image of module {i}: {len(image)} bytes, expected {EEPROM_BYTES}")
            payload += image + struct.pack("<iiHH", *map(int, position_q8[i]), *map(int, pot_mv[i]))
        try:
            self.symbols = Symbols(*struct.unpack("<5H", self._request(b"I", bytes(payload))))
        except BaseException:
            self.close()
            raise
        self.cycle = 0

    # ------------------------------------------------------------------ requests
    def _request(self, opcode: bytes, payload: bytes = b"") -> bytes:
        if self._process.poll() is not None:
            raise HarnessError(f"the AVR simulator harness exited (status {self._process.returncode})")
        try:
            self._in.write(_HEADER.pack(opcode[0], len(payload)) + payload)
            status, length = _HEADER.unpack(self._read(_HEADER.size))
            body = self._read(length)
        except (BrokenPipeError, OSError) as exc:
            raise HarnessError(f"the AVR simulator harness died ({exc})") from exc
        if status != 0:
            raise HarnessError(f"the AVR simulator harness refused {opcode.decode()}: {body.decode(errors='replace')}")
        return body

    @staticmethod
    def _frame_block(frames: list[tuple[int, int, bytes]]) -> bytes:
        if not frames:
            return b""
        block = np.zeros(len(frames), _FRAME_IN)
        for i, (frame_id, dlc, data) in enumerate(frames):
            block[i]["id"] = frame_id
            block[i]["dlc"] = dlc
            block[i]["data"][: len(data)] = np.frombuffer(data[:8], np.uint8)
        return block.tobytes()

    def _read(self, size: int) -> bytes:
        chunks, got = [], 0
        while got < size:
            chunk = self._out.read(size - got)
            if not chunk:
                raise HarnessError(f"the AVR simulator harness ended its output (status {self._process.poll()})")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def step(
        self,
        end_cycle: int,
        substeps: int,
        position_q8: np.ndarray,
        pot_mv: np.ndarray,
        current_limited: np.ndarray,
        frames: list[tuple[int, int, bytes]],
    ) -> StepResult:
        """Run every module to ``end_cycle``: the encoders move linearly to ``position_q8`` (n, 2) by then,
        ``current_limited`` (n,) holds the H-bridges' flags, ``frames`` (id with ID_* flags, dlc, data) enter the
        bus from the PC's adapter at the step's start. The duty comes back averaged over each of ``substeps``
        equal parts of the step: ``duty`` (n, substeps, 2)."""
        values = np.empty((self.n_modules, 5), np.int64)
        values[:, 0:2] = position_q8
        values[:, 2:4] = pot_mv
        values[:, 4] = current_limited
        payload = self._step_head.pack(end_cycle, substeps, *values.ravel().tolist(), len(frames))
        payload += self._frame_block(frames)
        body = self._request(b"S", payload)
        reply = self._step_replies.get(substeps)
        if reply is None:
            reply = self._step_replies[substeps] = struct.Struct(
                "<Q" + ("i" * 2 * substeps + "B") * self.n_modules + "H"
            )
        fields = reply.unpack_from(body)
        self.cycle = fields[0]
        per_module = np.array(fields[1:-1], np.int64).reshape(self.n_modules, 2 * substeps + 1)
        duty = per_module[:, :-1].reshape(self.n_modules, substeps, 2) * 1e-6
        out = np.frombuffer(body, FRAME_OUT, fields[-1], reply.size)
        return StepResult(self.cycle, duty, per_module[:, -1], out)

    def set_plant(
        self, parameters: list[float], substeps_per_period: int, sensor_joint: bool, states: np.ndarray
    ) -> None:
        """From now on the harness integrates the drives and an independent inertia per axis itself (request 'K',
        ``firmware_sim/src/plant.h``): ``parameters`` in its order, ``states`` (n, 2, 4) gear angle, gear rate,
        joint angle, joint rate per axis."""
        payload = struct.pack("<16d", *parameters, 0.0) + struct.pack("<IB", substeps_per_period, int(sensor_joint))
        self._request(b"K", payload + np.ascontiguousarray(states, "<f8").tobytes())

    def run(self, end_cycle: int, frames: list[tuple[int, int, bytes]]) -> RunResult:
        """Run to ``end_cycle`` on the harness's own plant (after `set_plant`); ``frames`` as in `step`."""
        payload = struct.pack("<QH", end_cycle, len(frames)) + self._frame_block(frames)
        body = self._request(b"R", payload)
        n = self.n_modules
        (self.cycle,) = struct.unpack_from("<Q", body)
        modules = np.frombuffer(body, _RUN_MODULE, n, 8)
        offset = 8 + n * _RUN_MODULE.itemsize
        (driven,) = struct.unpack_from("<Q", body, offset)
        limited = np.frombuffer(body, "<u4", 4 * n, offset + 8).reshape(n, 4)[:, :2].astype(np.int64)
        (n_frames,) = struct.unpack_from("<H", body, offset + 8 + 16 * n)
        out = np.frombuffer(body, FRAME_OUT, n_frames, offset + 10 + 16 * n)
        return RunResult(self.cycle, modules["state"].copy(), modules["flags"].copy(), modules["limited"].copy(),
                         modules["duty_ppm"] * 1e-6, int(driven), limited, out)  # fmt: skip

    def set_realtime_priority(self, priority: int) -> None:
        """SCHED_FIFO for the harness process too (it was started before the caller raised its own): on a loaded
        machine the ten simulated cores must not wait behind other processes. Raises OSError if refused."""
        os.sched_setscheduler(self._process.pid, os.SCHED_FIFO, os.sched_param(priority))

    def peek(self, module: int, address: int, size: int) -> bytes:
        """Bytes of a module's SRAM (a debugger's view: the firmware does not notice)."""
        return self._request(b"P", struct.pack("<BHH", module, address, size))

    def poke(self, module: int, address: int, value: int) -> None:
        """Write an I/O register of a module as its CPU would (fault injection)."""
        self._request(b"W", struct.pack("<BHB", module, address, value))

    def stats(self, *, restart: bool = False) -> dict:
        """The harness's counters per module and of the bus; ``restart``: count afresh from now on."""
        body = self._request(b"T", b"\x01" if restart else b"")
        modules = np.frombuffer(body, _STATS_MODULE, self.n_modules)
        busy, frames, losses = struct.unpack_from("<QII", body, self.n_modules * _STATS_MODULE.itemsize)
        return {
            "modules": [{name: int(row[name]) for name in _STATS_MODULE.names or ()} for row in modules],
            "bus_busy_cycles": busy,
            "bus_frames": frames,
            "arbitration_losses": losses,
        }

    def close(self) -> None:
        if self._process.poll() is None:
            try:
                self._in.write(_HEADER.pack(ord("Q"), 0))
                self._process.wait(timeout=2.0)
            except (OSError, subprocess.TimeoutExpired):
                self._process.kill()
                self._process.wait()
        for stream in (self._in, self._out):
            try:
                stream.close()
            except OSError:
                pass

    def __enter__(self) -> AvrHarness:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
