"""Strict validation of TOML tables.

Every experiment file, robot description and backend table goes through :class:`Table`, so an unknown key names
itself and the allowed keys, and a value out of range names the range. Errors carry the dotted path of the key
(``gait.amplitude_h_deg``) so the one-line CLI message points at the exact spot in the file.
"""

from __future__ import annotations

import math
import os
import stat
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aiko.core.errors import ConfigError

_MISSING = object()


class Table:
    """A read-once view of one TOML table that records which keys were consumed.

    Call the typed getters for every key the consumer understands, then :meth:`finish` to reject the rest.
    """

    def __init__(self, data: Any, path: str, source: str = "") -> None:
        if not isinstance(data, Mapping):
            raise ConfigError(f"{_where(source)}[{path}] must be a table, got {type(data).__name__}")
        self._data = dict(data)
        self.path = path
        self.source = source
        self._used: set[str] = set()

    def __contains__(self, key: str) -> bool:
        return key in self._data

    def keys(self) -> list[str]:
        return list(self._data)

    def _key(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def _fail(self, key: str, message: str) -> ConfigError:
        return ConfigError(f"{_where(self.source)}{self._key(key)}: {message}")

    def _raw(self, key: str, default: Any) -> Any:
        self._used.add(key)
        if key in self._data:
            return self._data[key]
        if default is _MISSING:
            raise self._fail(key, "missing required key")
        return default

    def number(
        self,
        key: str,
        default: Any = _MISSING,
        *,
        min: float | None = None,
        max: float | None = None,
        min_exclusive: bool = False,
        integer: bool = False,
    ) -> Any:
        """A finite number (or int with ``integer=True``) inside [min, max] (``min_exclusive`` for (min, max])."""
        value = self._raw(key, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self._fail(key, f"expected a number, got {value!r}")
        if integer and not isinstance(value, int):
            raise self._fail(key, f"expected an integer, got {value!r}")
        if not math.isfinite(value):
            raise self._fail(key, f"must be finite, got {value!r}")
        low_bad = min is not None and (value <= min if min_exclusive else value < min)
        high_bad = max is not None and value > max
        if low_bad or high_bad:
            raise self._fail(key, f"{value!r} is out of range {_range_text(min, max, min_exclusive)}")
        return value

    def integer(self, key: str, default: Any = _MISSING, *, min: int | None = None, max: int | None = None) -> Any:
        return self.number(key, default, min=min, max=max, integer=True)

    def boolean(self, key: str, default: Any = _MISSING) -> bool:
        value = self._raw(key, default)
        if not isinstance(value, bool):
            raise self._fail(key, f"expected true or false, got {value!r}")
        return value

    def string(self, key: str, default: Any = _MISSING, *, choices: Sequence[str] | None = None) -> Any:
        value = self._raw(key, default)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self._fail(key, f"expected a string, got {value!r}")
        if choices is not None and value not in choices:
            raise self._fail(key, f"{value!r} is not one of: {', '.join(choices)}")
        return value

    def number_list(
        self,
        key: str,
        default: Any = _MISSING,
        *,
        length: int | None = None,
        min: float | None = None,
        max: float | None = None,
    ) -> Any:
        value = self._raw(key, default)
        if value is None:
            return None
        if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, int | float) for v in value):
            raise self._fail(key, f"expected a list of numbers, got {value!r}")
        if length is not None and len(value) != length:
            raise self._fail(key, f"expected {length} numbers, got {len(value)}")
        for v in value:
            if not math.isfinite(v) or (min is not None and v < min) or (max is not None and v > max):
                raise self._fail(key, f"element {v!r} is out of range {_range_text(min, max, False)}")
        return [float(v) for v in value]

    def table(self, key: str, default: Any = _MISSING) -> Table:
        value = self._raw(key, default)
        return Table(value if value is not None else {}, self._key(key), self.source)

    def raw(self, key: str, default: Any = _MISSING) -> Any:
        """The value unchecked, for a consumer that validates it itself."""
        return self._raw(key, default)

    def finish(self) -> None:
        """Reject every key no getter asked for."""
        unknown = sorted(set(self._data) - self._used)
        if unknown:
            allowed = ", ".join(sorted(self._used)) or "(none)"
            raise self._fail(unknown[0], f"unknown key; allowed keys here: {allowed}")


MAX_CONFIG_BYTES = 4 * 1024 * 1024  # a robot or experiment file is a few kB; more is not a config file


def read_config_text(path: str | os.PathLike[str], what: str, max_bytes: int = MAX_CONFIG_BYTES) -> str:
    """The text of a file a setting names; ConfigError unless it is a regular file of at most ``max_bytes``.

    ``robot = ""`` names the experiment's directory and ``robot = "/dev/zero"`` a device that never ends: both must
    be one line, not ``IsADirectoryError`` or a read until the memory runs out."""
    path = Path(path)
    if str(path) in ("", "."):
        raise ConfigError(f"{what}: empty file name")
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ConfigError(f"{what} not found: {path}") from None
    except OSError as exc:
        raise ConfigError(f"{what} {path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"{what} {path} is a directory, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"{what} {path} is not a regular file (a device, pipe or socket)")
    if info.st_size > max_bytes:
        raise ConfigError(f"{what} {path} is {info.st_size} bytes; a config file is at most {max_bytes} bytes")
    try:
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise ConfigError(f"{what} {path}: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise ConfigError(f"{what} {path} grew past {max_bytes} bytes while being read")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} {path} is not UTF-8 text (byte {exc.start})") from None


def read_toml(
    path: str | os.PathLike[str], what: str, overrides: Mapping[str, Any] | None = None
) -> tuple[dict[str, Any], str]:
    """A TOML file's top-level table (with ``overrides`` applied) and its text: `read_config_text`'s checks (a
    regular UTF-8 file of sane size, each failure one line), then malformed TOML is a ``ConfigError`` too. Every
    configuration file of the stack (experiments, robots, rod experiments, sweeps) is read here."""
    text = read_config_text(path, what)
    data = parse_toml(text, str(path))
    apply_overrides(data, overrides or {})
    return data, text


def parse_toml(text: str, source: str) -> dict[str, Any]:
    """TOML text as a table; malformed TOML is one ``ConfigError`` naming ``source``. That includes values nested so
    deep that the parser (recursive, as tomllib is) runs out of stack: 4 kB of ``[[[[...`` is a bad file, not a
    crash (issue 26)."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: malformed TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{source}: malformed TOML: arrays or tables nested too deep to read") from None


def parse_override(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with a dotted key and a TOML value (bare words are taken as strings)."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"override {text!r}: expected KEY=VALUE, e.g. sim.mu_transversal=0.2")
    try:
        parsed = tomllib.loads(f"v = {value.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        parsed = value.strip()
    return key, parsed


def apply_overrides(data: dict[str, Any], overrides: Mapping[str, Any]) -> None:
    """Set dotted keys (``sim.mu_transversal``) in a parsed file; a key whose parent is not a table is an error."""
    for dotted, value in overrides.items():
        node = data
        parts = dotted.split(".")
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"override {dotted}: {part} is not a table")
            node = child
        node[parts[-1]] = value


def _where(source: str) -> str:
    return f"{source}: " if source else ""


def _range_text(low: float | None, high: float | None, low_exclusive: bool) -> str:
    left = "(" if low_exclusive else "["
    lo = "-inf" if low is None else repr(low)
    hi = "inf" if high is None else repr(high)
    return f"{left}{lo}, {hi}]"
