"""The firmware's state machine and controller (joint_module.c) compiled for the host, driven through ctypes."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import pytest

from firmware_protocol.emulator.firmware import MODULE_LAYOUT, _unpack_module

PKG = Path(__file__).resolve().parents[3] / "firmware_protocol"
FIRMWARE = PKG / "firmware"
SHIM = Path(__file__).with_name("host_shim.c")


class Frame(ctypes.Structure):
    _fields_ = [
        ("id", ctypes.c_uint16),
        ("dlc", ctypes.c_uint8),
        ("flags", ctypes.c_uint8),
        ("data", ctypes.c_uint8 * 8),
    ]


def build_library(directory: Path) -> Path:
    if shutil.which("gcc") is None:
        pytest.skip("host gcc is not installed; the firmware's logic cannot be compiled for the host")
    out = directory / "libjoint_module.so"
    sources = [SHIM, FIRMWARE / "joint_module.c", PKG / "aiko_joint.c"]
    cmd = ["gcc", "-shared", "-fPIC", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O2"]
    subprocess.run([*cmd, f"-I{FIRMWARE}", f"-I{PKG}", *map(str, sources), "-o", str(out)], check=True)
    return out


class HostModule:
    """One joint module's firmware logic on the host: frames in, ticks, frames out, its state read back."""

    def __init__(self, library: ctypes.CDLL, node: int, values: list[float] | None, counts=(0, 0)) -> None:
        self.lib = library
        self.buffer = ctypes.create_string_buffer(library.shim_module_size())
        array = (ctypes.c_float * 12)(*values) if values is not None else None
        library.jm_init(self.buffer, node, array, (ctypes.c_int32 * 2)(*counts))
        self.counts = list(counts)
        library.shim_take_frames((Frame * 256)(), 256)

    def frame(self, frame_id: int, data: bytes, *, extended: bool = False, remote: bool = False) -> list[tuple]:
        f = Frame(frame_id & 0xFFFF, len(data), (1 if extended else 0) | (2 if remote else 0))
        for i, b in enumerate(data[:8]):
            f.data[i] = b
        self.lib.jm_on_frame(self.buffer, ctypes.byref(f), (ctypes.c_int32 * 2)(*self.counts))
        return self._frames()

    def tick(self, counts=None, current_limited: int = 0) -> tuple[bool, list[tuple]]:
        if counts is not None:
            self.counts = [int(c) for c in counts]
        enabled = self.lib.jm_tick(self.buffer, (ctypes.c_int32 * 2)(*self.counts), current_limited)
        return bool(enabled), self._frames()

    def _frames(self) -> list[tuple]:
        out = (Frame * 256)()
        n = self.lib.shim_take_frames(out, 256)
        return [(out[i].id, bytes(out[i].data[: out[i].dlc])) for i in range(n)]

    def state(self) -> dict:
        return _unpack_module(self.buffer.raw[: MODULE_LAYOUT.size])


def load(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    lib.jm_tick.restype = ctypes.c_uint8
    lib.shim_offset.argtypes = [ctypes.c_char_p]
    lib.shim_axis_offset.argtypes = [ctypes.c_char_p]
    lib.jm_counts_to_cdeg.restype = ctypes.c_int16
    lib.jm_counts_to_cdeg.argtypes = [ctypes.c_int32]
    lib.jm_cdeg_to_q8.argtypes = [ctypes.c_int16]
    return lib
