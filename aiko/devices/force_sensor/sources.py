"""Where the emulated sensor's wrench comes from: a constant, a table (CSV / NPZ) or a Python hook.

Every source is a callable ``t_s -> (Fx, Fy, Fz, Tx, Ty, Tz)`` in N and N·m: the wrench the tool side exerts ON
the sensor, in the sensor frame (the convention of :mod:`aiko.devices.force_sensor.wrench`), with t_s the seconds
since the emulator started streaming.

Feeding it from a rod simulator: a Cosserat model reports the *base wrench* as the wrench the clamp (the sensor)
applies to the rod. The sensor measures the reaction, so the hook must return its negative (Newton's third law):
``lambda t: -base_wrench(t)``, after rotating it from the rod's base frame into the sensor frame if the two differ
(and moving the torque to the sensor's reference point: tau_sensor = tau_base + r x F for an offset r).
"""

from __future__ import annotations

import csv
import importlib
import importlib.util
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from aiko.core.errors import ConfigError

WrenchSource = Callable[[float], Sequence[float]]
COLUMNS = ("t_s", "fx_n", "fy_n", "fz_n", "tx_nm", "ty_nm", "tz_nm")


def parse_wrench(text: str) -> tuple[float, ...]:
    """``"FX,FY,FZ,TX,TY,TZ"`` -> six floats; ConfigError in one line otherwise."""
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise ConfigError(f"bad wrench {text!r}: expected six numbers FX,FY,FZ,TX,TY,TZ (N, N·m)") from None
    if len(values) != 6 or not all(np.isfinite(values)):
        raise ConfigError(f"bad wrench {text!r}: expected six finite numbers FX,FY,FZ,TX,TY,TZ (N, N·m)")
    return values


def constant(wrench: Sequence[float]) -> WrenchSource:
    values = tuple(float(v) for v in wrench)
    if len(values) != 6:
        raise ConfigError(f"a wrench has six values, got {len(values)}")
    return lambda t_s: values


class TableSource:
    """Linear interpolation in a time table; before the first row the first value, after the last the last."""

    def __init__(self, t_s: np.ndarray, wrench: np.ndarray, name: str) -> None:
        if t_s.ndim != 1 or wrench.shape != (len(t_s), 6) or len(t_s) == 0:
            raise ConfigError(f"{name}: need a column t_s and six wrench columns of the same length")
        if np.any(np.diff(t_s) <= 0) or not np.all(np.isfinite(wrench)):
            raise ConfigError(f"{name}: t_s must increase strictly and every value must be finite")
        self.t_s = t_s.astype(float)
        self.wrench = wrench.astype(float)

    def __call__(self, t_s: float) -> tuple[float, ...]:
        return tuple(float(np.interp(t_s, self.t_s, self.wrench[:, k])) for k in range(6))


def from_file(path: str | Path) -> TableSource:
    """CSV with header ``t_s,fx_n,fy_n,fz_n,tx_nm,ty_nm,tz_nm``, or NPZ with arrays ``t_s`` and ``wrench`` (N x 6)."""
    path = Path(path)
    try:
        if path.suffix == ".npz":
            with np.load(path) as data:
                if "t_s" not in data or "wrench" not in data:
                    raise ConfigError(f"{path}: an NPZ wrench table needs arrays 't_s' and 'wrench' (N x 6)")
                return TableSource(np.asarray(data["t_s"]), np.asarray(data["wrench"]), str(path))
        with path.open(newline="") as fh:
            reader = csv.DictReader(fh)
            missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
            if missing:
                raise ConfigError(f"{path}: CSV wrench table lacks column(s) {', '.join(missing)}")
            rows = [[float(row[c]) for c in COLUMNS] for row in reader]
    except OSError as exc:
        raise ConfigError(f"cannot read wrench table {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ConfigError(f"{path}: not a number in the wrench table ({exc})") from None
    table = np.asarray(rows, dtype=float).reshape(-1, 7)
    return TableSource(table[:, 0], table[:, 1:], str(path))


def from_hook(spec: str) -> WrenchSource:
    """``package.module:function`` or ``path/to/file.py:function``; the function maps t_s to six values."""
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"bad wrench hook {spec!r}: expected MODULE:FUNCTION or FILE.py:FUNCTION")
    try:
        if module_name.endswith(".py"):
            module_spec = importlib.util.spec_from_file_location("aiko_ft_wrench_hook", module_name)
            if module_spec is None or module_spec.loader is None:
                raise ImportError(module_name)
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
        hook = getattr(module, attr)
    except (ImportError, AttributeError, OSError) as exc:
        raise ConfigError(f"cannot load wrench hook {spec!r}: {exc}") from None
    if not callable(hook):
        raise ConfigError(f"wrench hook {spec!r} is not callable")
    return hook
