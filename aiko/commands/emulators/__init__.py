"""The ``aiko emulate`` devices: one module per device, each with ``register(subparsers)`` (see ``emulate``)."""
