"""Driving Aiko live (``aiko drive``): input devices, the drive task, the operator-command channel, and turning a
driven run back into an experiment file. The steerable gait itself is ``aiko.robots.aiko.gaits.steerable``."""
