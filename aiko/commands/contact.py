"""``aiko contact example``: the planar contact-mode solver (paper 003) on its worked examples."""

from __future__ import annotations

import argparse
import json
import math

import numpy as np

from aiko.commands import SUMMARIES
from aiko.core.errors import AikoError

EXAMPLE_NAMES = ("block", "two_link", "table", "bearing", "painleve")
INPUT_HELP = {
    "block": "push force P [N]",
    "two_link": "elbow torque [N m]",
    "table": "horizontal push on the table [N]",
    "bearing": "spin torque on the disk [N m]",
    "painleve": "moment on the rod [N m]",
}


def register(sub: argparse._SubParsersAction) -> None:
    contact = sub.add_parser("contact", help=SUMMARIES["contact"])
    contact_sub = contact.add_subparsers(dest="contact_command", metavar="ACTION", parser_class=type(contact))
    ex = contact_sub.add_parser(
        "example",
        help="list every feasible contact mode of a worked example: rank of A, ambiguity, consistency",
        description="Enumerate the kinematically feasible contact modes of one of the paper's examples and "
        "report, per mode, the rank of A, the number of ambiguity variables, whether the mode is consistent "
        "for the given input, and which modes overlap (between-mode ambiguity).",
    )
    ex.add_argument("name", choices=EXAMPLE_NAMES, help="which example")
    ex.add_argument("--mu", type=float, metavar="X", help="Coulomb friction coefficient (default per example)")
    ex.add_argument("--theta-deg", type=float, metavar="D", help="painleve only: rod angle (default tan θ = 2)")
    ex.add_argument(
        "--tau",
        type=float,
        metavar="U",
        help="the example's input: " + "; ".join(f"{k}: {v}" for k, v in INPUT_HELP.items()),
    )
    ex.add_argument("--json", action="store_true", help="print one JSON object")
    ex.set_defaults(handler=run_example)
    contact.set_defaults(handler=lambda args: contact.print_help() or 2)


def build_example(name: str, mu: float | None, theta_deg: float | None, tau: float | None):
    from sim.planar_contact import examples
    from sim.planar_contact.system import ContactModelError

    if mu is not None and (not math.isfinite(mu) or mu < 0):
        raise AikoError(f"--mu must be a finite number >= 0, got {mu}")
    if theta_deg is not None and name != "painleve":
        raise AikoError("--theta-deg applies to the painleve example only")
    if tau is not None and not math.isfinite(tau):
        raise AikoError(f"--tau must be finite, got {tau}")
    input_kw = {
        "block": "push_N",
        "two_link": "elbow_torque_Nm",
        "table": "push_N",
        "bearing": "spin_torque_Nm",
        "painleve": "moment_Nm",
    }[name]
    kwargs: dict = {}
    if mu is not None:
        kwargs["mu"] = mu
    if tau is not None:
        kwargs[input_kw] = tau
    if theta_deg is not None:
        kwargs["theta_deg"] = theta_deg
    try:
        return examples.EXAMPLES[name](**kwargs)
    except ContactModelError as exc:
        raise AikoError(str(exc)) from None


def example_report(example) -> dict:
    from sim.planar_contact import analyse, modes_consistent_with

    snap = example.snapshot
    analysis = analyse(snap)
    consistent = {c.mode: c for c in modes_consistent_with(snap, example.tau)}
    modes = []
    for index, ma in enumerate(analysis.modes):
        sol = ma.solution
        entry = {
            "mode": "".join(ma.mode),
            "rank_A": sol.rank,
            "shape_A": list(sol.shape),
            "rank_case": sol.case.name.lower(),
            "ambiguity_dimension": sol.n_w,
            "acceleration_ambiguous": sol.acceleration_ambiguous(),
            "within_mode_ambiguity": ma.within_mode_ambiguity,
            "consistent_for_some_input": ma.consistent_somewhere,
            "consistent": ma.mode in consistent,
        }
        if ma.torque_domain is not None:
            entry["torque_domain"] = _polytope_json(ma.torque_domain)
            entry["unambiguous_torque_domain"] = [_polytope_json(P) for P in analysis.unambiguous_torques(index)]
        if ma.mode in consistent:
            c = consistent[ma.mode]
            z = c.sample()
            entry["qdd"] = [float(v) for v in z[: snap.n_q]]
            entry["forces"] = [float(v) for v in z[snap.n_q :]]
            if c.w_domain is not None:  # JSON has no infinity: unbounded ends are null
                entry["qdd_range"] = [[float(v) if np.isfinite(v) else None for v in row] for row in c.qdd_range()]
        modes.append(entry)
    return {
        "example": example.name,
        "description": example.description,
        "parameters": {k: float(v) for k, v in example.parameters.items()},
        "tau": [float(v) for v in example.tau],
        "coordinates": list(snap.coordinate_names),
        "contacts": list(snap.contact_names),
        "feasible_modes": len(modes),
        "consistent_modes": len(consistent),
        "ambiguous_mode_pairs": [["".join(a), "".join(b)] for a, b in analysis.ambiguous_pairs()],
        "modes": modes,
    }


def _interval(P) -> list[float | None] | None:
    """[lo, hi] of a one-dimensional torque polytope (None for an unbounded end); None if not 1-D."""
    if P.dim != 1 or P.A_eq.shape[0]:
        return None
    lo, hi = -np.inf, np.inf
    for n, e in zip(P.N[:, 0], P.e, strict=True):
        if n > 1e-12:
            lo = max(lo, e / n)
        elif n < -1e-12:
            hi = min(hi, e / n)
    return [float(lo) if np.isfinite(lo) else None, float(hi) if np.isfinite(hi) else None]


def _polytope_json(P) -> dict:
    out = {"N": P.N.tolist(), "e": P.e.tolist(), "A_eq": P.A_eq.tolist(), "b_eq": P.b_eq.tolist()}
    interval = _interval(P)
    if interval is not None:
        out["interval"] = interval
    return out


def _fmt(v: float | None, lower: bool = False) -> str:
    if v is None:
        return "-inf" if lower else "inf"
    return f"{v:.4g}"


def _domain_text(m: dict) -> str:
    if "torque_domain" not in m:
        return "-"
    iv = m["torque_domain"].get("interval")
    if iv is None:
        return f"{len(m['torque_domain']['e'])} inequalities"
    pieces = [p.get("interval") for p in m["unambiguous_torque_domain"]]
    text = f"[{_fmt(iv[0], True)}, {_fmt(iv[1])}]"
    if pieces != [iv]:
        text += " (" + (", ".join(f"[{_fmt(a, True)}, {_fmt(b)}]" for a, b in pieces) or "none") + ")"
    return text


def run_example(args: argparse.Namespace) -> int:
    report = example_report(build_example(args.name, args.mu, args.theta_deg, args.tau))
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"{report['example']}: {report['description']}")
    print(
        "  parameters: "
        + ", ".join(f"{k}={v:.4g}" for k, v in report["parameters"].items())
        + f"; input tau={report['tau']}"
    )
    print(f"  contacts: {', '.join(report['contacts'])}; coordinates: {', '.join(report['coordinates'])}")
    print(
        f"  {'mode':<8}{'rank A':>9}{'ambiguity':>11}  consistent  "
        f"{'inputs T_c (unambiguous T*_c)':<34}q̈ (smallest-w member)"
    )
    for m in report["modes"]:
        qdd = np.array2string(np.array(m["qdd"]), precision=4, suppress_small=True) if "qdd" in m else ""
        flag = "yes" if m["consistent"] else ("no" if m["consistent_for_some_input"] else "never")
        rank = f"{m['rank_A']}/{m['shape_A'][1]}"
        domain = _domain_text(m)
        print(f"  {m['mode']:<8}{rank:>9}{m['ambiguity_dimension']:>11}  {flag:<10}  {domain:<34}{qdd}")
        if "qdd_range" in m:
            ranges = ", ".join(
                f"{name} in [{_fmt(lo, True)}, {_fmt(hi)}]"
                for name, (lo, hi) in zip(report["coordinates"], m["qdd_range"], strict=True)
                if lo is None or hi is None or hi - lo > 1e-9
            )
            if ranges:
                print(f"  {'':<8}{'':>9}{'':>11}  {'':<10}  {'':<34}ambiguous: {ranges}")
    print(f"  consistent modes: {report['consistent_modes']} of {report['feasible_modes']} feasible")
    if report["ambiguous_mode_pairs"]:
        print("  between-mode ambiguity: " + ", ".join(f"{a}/{b}" for a, b in report["ambiguous_mode_pairs"]))
    return 0
