"""The PC side of the joint-module CAN protocol, over any python-can bus.

`driver.CanJointDriver` streams references, collects feedback through a python-can `Notifier` (or synchronous
polling in lockstep HIL runs), tracks per-module health (`health`) and always leaves the modules disabled;
`shaping` clamps and slew-limits references; `frame_log` writes every frame; `estop` is the emergency stop that
starts in a fraction of a second (this package's ``__init__`` imports nothing, so ``aiko can estop`` loads no
numpy). The backends `can` and `hil` in `aiko.robots.aiko.backends` wrap the driver for `aiko run`.
"""
