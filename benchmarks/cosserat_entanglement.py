"""Two crossed rods twisted into each other (paper 004, Sec. IX-B, Figs. 13–14), at small scale.

    python benchmarks/cosserat_entanglement.py --sections 10 20 40 --contact-sections 20 --json

Two rods (L = 0.2 m, r = 5 mm, E = 1 MPa, ρ = 1100 kg/m³, τ = 0.02 s, no gravity). Their bases are
clamped on one plate, 10 mm apart across the x axis; their tips are pinned (ball joints) on a fixed plate at
x = 0.19 m on the *opposite* sides, so the rods cross in the middle with 0.5 mm of vertical clearance (a half
turn of entanglement to start with). The base plate then turns about the x axis at 1 turn/s (the bases'
poses are prescribed, `base_alpha_next`; --direction −1, the default, is the sense that winds them further: +1
first unwinds the initial half turn), the rods wind around each other, and the run stops at 540° or when
a step fails (ConvergenceError: the twist stalls). The initial shapes come from `solve_statics` with the
pins continued from the straight rods.

Reported per n (strain sections; the contact field m is fixed, as Fig. 14): the angle reached, rod 0's nodal
contact load (normal force per pair node, N) at 180°, 360° and 540°, its total, the deepest penetration, the
load's total variation along the rod (Σ|F_j+1 − F_j| / ΣF: Fig. 14's "fluctuation"), Newton iterations and
wall time. Pure physics from `sim.cosserat.multirod`; this script only sets the scene and prints JSON.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.cosserat import (  # noqa: E402
    ConvergenceError,
    NewtonSettings,
    PointConstraint,
    Smoothing,
    build_model,
    solve_statics,
)
from sim.cosserat.model import initial_state  # noqa: E402
from sim.cosserat.multirod import (  # noqa: E402
    PairContact,
    build_system,
    initial_system_state,
    pair_contact_points,
    step_rods,
)
from sim.cosserat.rod import uniform_rod  # noqa: E402

LENGTH_M, RADIUS_M = 0.2, 0.005
SPAN_M = 0.199  # base plate to tip plate (the bent rods are then nearly unstretched)
HALF_GAP_M = 0.005  # bases at y = ±5 mm
CLEARANCE_M = 5e-4
TURN_RATE_RAD_S = 2 * np.pi
MARKS_DEG = (180.0, 360.0, 540.0)


def _rx(angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def build_scene(n: int, m: int, mu: float, smoothing: str):
    rod = uniform_rod(LENGTH_M, RADIUS_M, 1e6, 1100.0, poisson_ratio=0.45, damping_time_s=0.02)
    z = RADIUS_M + 0.5 * CLEARANCE_M
    bases = [np.array([0.0, HALF_GAP_M, z]), np.array([0.0, -HALF_GAP_M, -z])]
    tips = [np.array([SPAN_M, -HALF_GAP_M, z]), np.array([SPAN_M, HALF_GAP_M, -z])]
    models, states = [], []
    for i in range(2):
        extra = pair_contact_points(LENGTH_M, m) if i == 0 else ()
        model = build_model(
            rod,
            n,
            gravity_m_s2=(0.0, 0.0, 0.0),
            constraints=(PointConstraint(LENGTH_M, "position", tuple(tips[i])),),
            extra_points_m=extra,
        )
        q0 = np.zeros(model.n_dof)
        q0[3:6] = bases[i]
        shape = solve_statics(model, q0, load_steps=20)
        state = initial_state(model, base_position_m=tuple(bases[i]), theta=shape.q[6:])
        models.append(model)
        states.append(state)
    pair = PairContact(0, 1, friction_coefficient=mu, m_sections=m, smoothing=Smoothing(smoothing, 50.0))
    system = build_system(models, [pair])
    return rod, system, initial_system_state(system, states), bases


def run(n: int, m: int, dt_s: float, mu: float, smoothing: str, direction: float, frame_terms: bool = False) -> dict:
    _, system, state, bases = build_scene(n, m, mu, smoothing)
    settings = NewtonSettings(contact_frame_terms=frame_terms)
    target = np.radians(MARKS_DEG[-1])
    n_steps = int(np.ceil(target / (TURN_RATE_RAD_S * dt_s)))
    loads: dict[str, list[float]] = {}
    iterations, halved, reached, error = [], 0, 0.0, None
    min_gap, previous = np.inf, 0.0
    t0 = time.perf_counter()
    for k in range(1, n_steps + 1):
        angle = min(k * TURN_RATE_RAD_S * dt_s, target)
        # The base rotation vector is (ψ, 0, 0). J_l(φ) is singular at |φ| = 2π, so φ is kept in (−π, π]: the
        # state's φ is shifted by −2π (the same pose: exp is 2π-periodic along a fixed axis) before it would
        # pass π, and the prescribed target with it, so (α_next − α)/h stays the true base rate.
        psi = direction * angle
        turns = 2 * np.pi * np.floor((psi + np.pi) / (2 * np.pi))
        for rod_state in state.rods:
            rod_state.q[0] = previous - turns
        alpha = [np.concatenate([[psi - turns, 0.0, 0.0], _rx(psi) @ b]) for b in bases]
        try:
            info = step_rods(system, state, dt_s, settings, base_alpha_next=alpha)
        except ConvergenceError as exc:
            error = str(exc)
            break
        reached, previous = angle, psi
        iterations.append(info.iterations)
        halved += info.substeps > 1
        pair = info.pairs[0]
        normal = np.linalg.norm(pair.force_n, axis=1)
        min_gap = min(min_gap, float(pair.gap_m.min()))
        for mark in MARKS_DEG:
            if f"{mark:.0f}" not in loads and np.degrees(angle) >= mark - 1e-9:
                loads[f"{mark:.0f}"] = [round(float(x), 6) for x in normal]
    wall = time.perf_counter() - t0
    out = {
        "sections": n,
        "contact_sections": m,
        "dt_s": dt_s,
        "friction_coefficient": mu,
        "direction": direction,
        "contact_frame_terms": frame_terms,
        "smoothing": smoothing,
        "angle_reached_deg": round(float(np.degrees(reached)), 3),
        "stalled": error is not None,
        "error": error,
        "contact_load_n": loads,
        "min_gap_m": min_gap,
        "wall_time_s": round(wall, 3),
        "steps": len(iterations),
        "newton_iterations_mean": float(np.mean(iterations)) if iterations else None,
        "halved_steps": int(halved),
    }
    for mark, values in loads.items():
        f = np.asarray(values)
        out.setdefault("total_load_n", {})[mark] = round(float(f.sum()), 6)
        out.setdefault("load_variation", {})[mark] = (
            round(float(np.abs(np.diff(f)).sum() / f.sum()), 4) if f.sum() > 0 else None
        )
        out.setdefault("loaded_nodes", {})[mark] = int(np.count_nonzero(f > 1e-3 * max(f.max(), 1e-300)))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", type=int, nargs="+", default=[10, 20, 40], help="strain sections n")
    parser.add_argument("--contact-sections", type=int, default=20, help="contact field m (fixed)")
    parser.add_argument("--dt", type=float, default=0.0025)
    parser.add_argument("--mu", type=float, default=0.3)
    parser.add_argument("--smoothing", default="sigmoid", choices=("sigmoid", "heaviside"))
    parser.add_argument(
        "--direction", type=float, default=-1.0, choices=(1.0, -1.0), help="sense of the base plate's turn about +x"
    )
    parser.add_argument(
        "--frame-terms", action="store_true", help="NewtonSettings(contact_frame_terms=True): pair frame turning"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = [
        run(n, args.contact_sections, args.dt, args.mu, args.smoothing, args.direction, args.frame_terms)
        for n in args.sections
    ]
    if args.json:
        print(json.dumps({"runs": results}))
    else:
        for r in results:
            print(json.dumps(r, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
