"""``aiko chain validate``: paper 002's validation procedure (Sec. 6.2) on the Lie-group chain model.

Inverse-dynamics torques along a Table 1 motion are replayed open-loop through the forward dynamics and the
angles compared; a passive run with gravity only from the same start measures energy drift. Results next to
the paper's reported 3.1434e-05 rad.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

from aiko.analysis.plots import save_figure
from aiko.commands import SUMMARIES
from aiko.core.errors import AikoError

DEFAULTS = {"link_length_m": 0.122, "link_mass_kg": 0.682, "link_radius_m": 0.0525}  # one Aiko link (paper 000)


def register(sub: argparse._SubParsersAction) -> None:
    chain = sub.add_parser("chain", help=SUMMARIES["chain"])
    chain_sub = chain.add_subparsers(dest="chain_command", metavar="ACTION", parser_class=type(chain))
    v = chain_sub.add_parser(
        "validate",
        help="replay inverse-dynamics torques of a Table 1 motion and report the angle errors",
        description=__doc__,
    )
    v.add_argument("--motion", choices=("cobra", "accordion", "helix"), default="cobra")
    v.add_argument("--bodies", type=int, default=20, metavar="N", help="number of bodies (default 20)")
    v.add_argument("--duration", type=float, default=0.2, metavar="S", help="horizon in seconds (default 0.2)")
    v.add_argument("--dt", type=float, default=1e-3, metavar="S", help="RK4 step / sample interval (default 1e-3)")
    v.add_argument(
        "--method",
        default="rk4",
        help="rk4 (fixed step, the paper's) or a scipy solve_ivp method such as DOP853 (adaptive, rtol 1e-10)",
    )
    v.add_argument("--axes", metavar="LETTERS", help="override the motion's joint axes, e.g. 'zzzz...' (N letters)")
    v.add_argument("--link-length", type=float, default=DEFAULTS["link_length_m"], metavar="M")
    v.add_argument("--link-mass", type=float, default=DEFAULTS["link_mass_kg"], metavar="KG")
    v.add_argument("--link-radius", type=float, default=DEFAULTS["link_radius_m"], metavar="M")
    v.add_argument("--gravity", type=float, default=9.81, metavar="M/S2", help="acts along -e3 (default 9.81)")
    v.add_argument("--no-energy", action="store_true", help="skip the passive energy-drift run")
    v.add_argument(
        "--horizon-tolerance",
        type=float,
        default=1e-6,
        metavar="RAD",
        help="report the horizon over which the replay error stays below this (default 1e-6 rad)",
    )
    v.add_argument("--plot", metavar="OUT.png", help="plot the max angle error against time (log scale)")
    v.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    v.set_defaults(handler=validate_command)
    o = chain_sub.add_parser(
        "offset-effect",
        help="size of the yaw-pitch axis offset on the body shape along an experiment's gait",
        description="Body shape from the gait's joint references with and without the robot's "
        "yaw_pitch_offset_m: shift of one link relative to link 1, and the error of every link estimated from "
        "that (tracked) link when the offset is ignored.",
    )
    o.add_argument("experiment", help="experiment TOML file, e.g. experiments/sidewinding.toml")
    o.add_argument("--link", type=int, default=6, metavar="K", help="link to report, 1-based (default 6, Vicon's)")
    o.add_argument("--duration", type=float, metavar="S", help="seconds of gait to sample (default: the run's)")
    o.add_argument("--rate", type=float, default=20.0, metavar="HZ", help="sample rate (default 20 Hz, Vicon's)")
    o.add_argument("--offset", type=float, metavar="M", help="axis offset (default: the robot's)")
    o.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    o.set_defaults(handler=offset_effect_command)
    chain.set_defaults(handler=lambda args: chain.print_help() or 2)


def _check_args(args: argparse.Namespace) -> None:
    if not 1 <= args.bodies <= 500:
        raise AikoError(f"--bodies must be in 1..500, got {args.bodies}")
    for flag, value in [("--duration", args.duration), ("--dt", args.dt), ("--link-length", args.link_length)]:
        if not (math.isfinite(value) and value > 0):
            raise AikoError(f"{flag} must be a positive number, got {value}")
    for flag, value in [("--link-mass", args.link_mass), ("--link-radius", args.link_radius)]:
        if not (math.isfinite(value) and value >= 0):
            raise AikoError(f"{flag} must be >= 0, got {value}")
    if args.link_mass == 0:
        raise AikoError("--link-mass must be > 0 (M* must be positive definite)")
    if not math.isfinite(args.gravity):
        raise AikoError(f"--gravity must be finite, got {args.gravity}")
    steps = args.duration / args.dt
    if abs(steps - round(steps)) > 1e-9 * steps:
        raise AikoError(f"--duration {args.duration} must be a whole number of --dt {args.dt} steps")
    if not (math.isfinite(args.horizon_tolerance) and args.horizon_tolerance > 0):
        raise AikoError(f"--horizon-tolerance must be a positive angle in rad, got {args.horizon_tolerance}")
    if steps > 1e6:
        raise AikoError(f"--duration/--dt asks for {steps:.0f} steps; at most 1e6 are allowed")


def validate_command(args: argparse.Namespace) -> int:
    from sim.chain import ChainModelError, table1_motion, uniform_chain, validate_motion
    from sim.chain.motions import PAPER_SUM_ABS_ANGLE_ERROR_RAD, PolynomialMotion, passive_energy_drift

    _check_args(args)
    started = time.perf_counter()
    try:
        motion = table1_motion(args.motion, args.bodies)
        if args.axes is not None:
            motion = PolynomialMotion(motion.name, motion.a_rad_s2, motion.b_rad, args.axes)
        chain = uniform_chain(
            args.bodies, args.link_length, args.link_mass, args.link_radius, motion.axes, gravity_m_s2=args.gravity
        )
        result = validate_motion(chain, motion, args.duration, args.dt, method=args.method)
        drift_j = scale_j = None
        if not args.no_energy:
            drift_j, scale_j = passive_energy_drift(chain, motion.b_rad, args.duration, args.dt, args.method)
    except ChainModelError as exc:
        raise AikoError(str(exc)) from None
    summary = {
        "motion": args.motion,
        "bodies": args.bodies,
        "duration_s": args.duration,
        "dt_s": args.dt,
        "method": args.method,
        "axes": motion.axes,
        "link_length_m": args.link_length,
        "link_mass_kg": args.link_mass,
        "link_radius_m": args.link_radius,
        "gravity_m_s2": args.gravity,
        "max_abs_angle_error_rad": result.max_abs_angle_error_rad,
        "sum_abs_angle_error_rad": result.sum_abs_angle_error_rad,
        "sum_abs_angle_error_all_samples_rad": result.sum_abs_angle_error_all_samples_rad,
        "max_round_trip_accel_error_rad_s2": result.max_round_trip_accel_error_rad_s2,
        "horizon_tolerance_rad": args.horizon_tolerance,
        "meaningful_horizon_s": result.horizon_s(args.horizon_tolerance),
        "paper_sum_abs_angle_error_rad": PAPER_SUM_ABS_ANGLE_ERROR_RAD,
        "energy_drift_j": drift_j,
        "energy_scale_j": scale_j,
        "integration_success": result.success,
        "integration_message": result.message,
        "wall_time_s": time.perf_counter() - started,
    }
    if args.plot:
        _plot_error(result, summary, args.plot)
    _print_summary(summary, args.json)
    return 0 if result.success else 1


def _plot_error(result, summary: dict, out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    err = np.maximum(result.max_error_history_rad(), 1e-17)  # log scale: exact zeros at t = 0
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.semilogy(result.t_s, err, lw=1.2, label="max |q - q_desired| over joints")
    ax.axhline(summary["paper_sum_abs_angle_error_rad"], color="k", ls="--", lw=0.8, label="paper: 3.1434e-05 rad")
    ax.axhline(summary["horizon_tolerance_rad"], color="r", ls=":", lw=0.8, label="horizon tolerance")
    ax.set_xlabel("t [s]")
    ax.set_ylabel("angle error [rad]")
    ax.set_title(f"{summary['motion']}, {summary['bodies']} bodies, {summary['method']} dt = {summary['dt_s']} s")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, out, dpi=110)


def offset_effect_command(args: argparse.Namespace) -> int:
    import dataclasses

    import numpy as np

    from aiko.robots.aiko.experiment import load_experiment
    from aiko.robots.aiko.shape import body_shape

    experiment = load_experiment(args.experiment)
    robot = experiment.robot
    if not robot.has_vertical_axis:
        raise AikoError(f"{robot.name} has yaw-only joints: there is no yaw-pitch axis offset to assess")
    offset = robot.yaw_pitch_offset_m if args.offset is None else args.offset
    if not (math.isfinite(offset) and 0 <= offset < robot.link_length_m):
        raise AikoError(f"--offset must be in [0, link length {robot.link_length_m}) m, got {offset}")
    if not 1 <= args.link <= robot.n_links:
        raise AikoError(f"--link must be in 1..{robot.n_links}, got {args.link}")
    duration = experiment.run.duration_s if args.duration is None else args.duration
    if not (math.isfinite(duration) and duration > 0) or not (math.isfinite(args.rate) and args.rate > 0):
        raise AikoError(f"--duration and --rate must be positive, got {duration} and {args.rate}")
    with_offset = dataclasses.replace(robot, yaw_pitch_offset_m=offset)
    k = args.link - 1
    shift_rel_link1, estimate_error = [], []
    times = np.arange(int(np.floor(duration * args.rate + 1e-9)) + 1) / args.rate
    for t in times:
        refs = experiment.gait.references(float(t))
        ideal = body_shape(robot, refs.angle_h_rad, refs.angle_v_rad, use_axis_offset=False)
        real = body_shape(with_offset, refs.angle_h_rad, refs.angle_v_rad)
        shift_rel_link1.append(float(np.linalg.norm(real.positions_m[k] - ideal.positions_m[k])))
        # track link k on the real robot, estimate the others ignoring the offset
        tracked = body_shape(
            robot,
            refs.angle_h_rad,
            refs.angle_v_rad,
            tracked_link=args.link,
            tracked_position_m=real.positions_m[k],
            tracked_quaternion_wxyz=real.quaternions_wxyz[k],
            use_axis_offset=False,
        )
        estimate_error.append(float(np.max(np.linalg.norm(tracked.positions_m - real.positions_m, axis=1))))
    shift = np.array(shift_rel_link1)
    summary = {
        "experiment": experiment.name,
        "robot": robot.name,
        "axis_offset_m": offset,
        "link": args.link,
        "duration_s": duration,
        "rate_hz": args.rate,
        "samples": int(times.size),
        "link_shift_rel_link1_max_m": float(shift.max()),
        "link_shift_rel_link1_rms_m": float(np.sqrt(np.mean(shift**2))),
        "other_links_error_from_tracked_link_max_m": float(max(estimate_error)),
    }
    _print_summary(summary, args.json)
    return 0


def _print_summary(summary: dict, as_json: bool) -> None:
    """One JSON object, or one aligned ``key value`` line per entry."""
    if as_json:
        json.dump(summary, sys.stdout)
        sys.stdout.write("\n")
        return
    width = max(map(len, summary), default=0)
    for key, value in summary.items():
        sys.stdout.write(f"{key:{width}s} {value}\n")
