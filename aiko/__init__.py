"""Aiko: the PC side of the snake-robot stack (robots, gaits, control loop, backends, logs, CLI)."""

__version__ = "0.2.0"  # the one place the version is written: pyproject.toml reads it; CHANGELOG.md says what changed

from aiko import _moved

_moved.install()
