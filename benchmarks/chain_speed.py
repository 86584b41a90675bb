"""Speed of the Lie-group chain model (paper 002), printed as JSON: one M* + N* + F* assembly by the O(n^2)
composite-body kernel (what the dynamics use), by the B-based numba kernel (B + B_dot + B^T M B, O(n^3)) and by
the numpy reference; one forward-dynamics evaluation; one RK4 step.

    python benchmarks/chain_speed.py --bodies 20 --json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sim.chain import assemble, forward_dynamics, rk4_step, uniform_chain  # noqa: E402
from sim.chain.composite import composite_matrices  # noqa: E402
from sim.chain.fast import eom_matrices  # noqa: E402


def per_call_s(fn, min_time_s: float) -> float:
    """Median over 5 batches of the time per call; each batch runs for about min_time_s / 5."""
    fn()  # warm-up (numba compile / caches)
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        elapsed = time.perf_counter() - t0
        if elapsed > min_time_s / 5:
            break
        n *= 2
    batches = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        batches.append((time.perf_counter() - t0) / n)
    return float(np.median(batches))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bodies", type=int, default=20)
    parser.add_argument("--axes", default=None, help="generator letters (default alternating z, y)")
    parser.add_argument("--dt", type=float, default=1e-3, help="RK4 step (s)")
    parser.add_argument("--min-time", type=float, default=1.0, help="seconds spent per measurement")
    parser.add_argument("--json", action="store_true", help="print JSON (always JSON; flag kept for symmetry)")
    args = parser.parse_args(argv)
    if args.bodies < 1:
        parser.error(f"--bodies must be >= 1, got {args.bodies}")
    n = args.bodies
    axes = args.axes or ("zy" * n)[:n]
    chain = uniform_chain(n, 0.122, 0.682, 0.0525, axes)
    rng = np.random.default_rng(0)
    q, qd, tau = rng.uniform(-1, 1, n), rng.normal(size=n), rng.normal(size=n)

    t_composite = per_call_s(lambda: composite_matrices(chain, q, qd), args.min_time)
    t_kernel = per_call_s(lambda: eom_matrices(chain, q, qd), args.min_time)
    t_numpy = per_call_s(lambda: assemble(chain, q, qd), args.min_time)
    t_fd = per_call_s(lambda: forward_dynamics(chain, q, qd, tau), args.min_time)
    t_rk4 = per_call_s(lambda: rk4_step(chain, q, qd, 0.0, args.dt, lambda t, a, b: tau), args.min_time)
    result = {
        "benchmark": "chain_speed",
        "bodies": n,
        "axes": axes,
        "assembly_Mstar_Nstar_F_composite_numba_us": t_composite * 1e6,
        "assembly_B_Bdot_Mstar_Nstar_F_numba_us": t_kernel * 1e6,
        "assembly_B_Bdot_Mstar_Nstar_F_numpy_reference_us": t_numpy * 1e6,
        "forward_dynamics_us": t_fd * 1e6,
        "rk4_step_us": t_rk4 * 1e6,
        "rk4_dt_s": args.dt,
        "real_time_factor_at_dt": args.dt / t_rk4,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "load_average_1min": os.getloadavg()[0],
    }
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
