"""Reactive gaits; each module registers itself with ``aiko.gait.register_gait``."""
