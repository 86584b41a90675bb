"""CLI sub-commands. A module here that defines ``register(subparsers)`` becomes part of ``aiko``."""

# One line per command, for `aiko --help`: the list answers without importing the commands (their modules load
# numba, scipy and the simulators: `aiko --help` took 1 s). Each command's `register` takes its help from here.
SUMMARIES = {
    "bench": "the soft-rod bench: run, replay, compare (paper 004, section X)",
    "can": "CAN bus tools: decode logs, emergency stop, scan the modules, module parameters, bus load",
    "chain": "Lie-group chain model (paper 002)",
    "compare": "compare two runs back to back (time alignment, distances, RMS errors, joint tracking)",
    "contact": "planar rigid-body contact modes (paper 003)",
    "dashboard": "open a recorded log in the dashboard (slider to scrub through time)",
    "drive": "drive the robot live: steer, change speed and switch gaits from a keyboard, gamepad or Foxglove",
    "emulate": "run a device's protocol emulator on a loopback address",
    "gait": "inspect gaits",
    "identify": "fit simulator settings to a recorded run (least squares; replays in parallel on a Dask cluster)",
    "log": "inspect, export or repair an experiment log (MCAP)",
    "optimize": "CMA-ES over gait settings for a metric, each generation in parallel on a Dask cluster",
    "replay": "replay a log's references through a simulator and record the result",
    "report": "write a run's report (HTML with figures, or a PNG)",
    "rhex": "planar RHex self-righting (paper 003)",
    "rod": "Cosserat rod simulator (paper 004)",
    "run": "run an experiment and record its log",
    "sweep": "run an experiment over many settings on a Dask cluster; one Parquet table of results",
}
