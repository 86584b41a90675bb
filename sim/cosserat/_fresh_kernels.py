"""Imported first by `sim.cosserat`: drops the package's numba cache when any of its sources changed
(`sim._kernel_cache`), before any kernel loads. The compiled step calls kernels of six files, and numba would
otherwise keep a kernel's machine code when only a callee's file changed."""

from pathlib import Path

from sim._kernel_cache import drop_stale_kernels

drop_stale_kernels(Path(__file__).parent)
