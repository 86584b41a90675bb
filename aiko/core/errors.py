"""Exceptions for problems a user can fix. The CLI prints them as one line and exits with status 2."""

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class AikoError(Exception):
    """Bad user input: a missing file, a malformed or out-of-range setting, an unknown name."""


class ConfigError(AikoError):
    """An experiment file, robot description or command-line override that fails validation."""


class HardwareError(AikoError):
    """A device that cannot be opened or that answers outside its contract."""


class RunStopped(Exception):
    """A run ended early because the robot reported it is not safe to continue (a module in ESTOP, WATCHDOG or
    fault). Not a user error: the CLI prints one line and exits 1; the log holds a ``run_stopped`` event."""

    def __init__(self, message: str, fields: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.fields = dict(fields or {})


@contextmanager
def writing(path: str | os.PathLike[str]) -> Iterator[None]:
    """Turn an ``OSError`` while writing a user-chosen output path (no such directory, a directory where a file
    should be, no permission, disk full) into an ``AikoError`` naming the path, so the CLI says it in one line."""
    try:
        yield
    except OSError as exc:
        raise AikoError(f"cannot write {path}: {exc.strerror or exc}") from None
