"""The spine every robot and device shares, and nothing robot- or device-specific: errors, configuration (strict
TOML tables, overrides, the section and backend registries), the clock, the periodic-task loop, the recorder and
backend contracts, run metadata, progress. Imports nothing from ``aiko.devices``, ``aiko.robots`` or above
(checked by import-linter in CI, ``make lint``)."""
