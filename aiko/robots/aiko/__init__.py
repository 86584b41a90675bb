"""Aiko, the 11-link snake robot with 10 two-axis (cardan) joints: its description, gaits, experiment files,
the backends that run a gait (kinematic, the simulators, the real robot over CAN, hardware-in-the-loop), the
recorded run and the paper runs."""
