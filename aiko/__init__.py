"""Aiko: the PC side of the snake-robot stack (robots, gaits, control loop, backends, logs, CLI)."""

__version__ = "0.1.0"

from aiko import _moved

_moved.install()
