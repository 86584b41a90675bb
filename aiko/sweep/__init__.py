"""``aiko sweep``: many runs of one experiment over a grid or a sample of its settings, on Dask distributed.

- :mod:`aiko.sweep.spec`: the sweep file (TOML) and its expansion into runs, each with a stable id and its own seed;
- :mod:`aiko.sweep.metrics`: the metric registry (distance, speed, heading, cost of transport, tracking RMS, …);
- :mod:`aiko.sweep.worker`: the unit of work, a pure function from one run to its result row;
- :mod:`aiko.sweep.results`: the Parquet result table, written incrementally and idempotently by run id;
- :mod:`aiko.sweep.execute`: the Dask client (a ``LocalCluster`` or any scheduler), progress, resume;
- :mod:`aiko.sweep.plots`: metric against parameter, heatmaps over two parameters.

Dask and pyarrow (the ``sweep`` extra) are imported inside these modules' functions only, so the CLI's other
commands never load them.
"""
