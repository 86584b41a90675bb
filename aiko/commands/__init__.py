"""CLI sub-commands. A module here that defines ``register(subparsers)`` becomes part of ``aiko``."""
