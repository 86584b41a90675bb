"""Reactive gaits; each module registers itself with ``aiko.robots.aiko.gait.register_gait``."""
