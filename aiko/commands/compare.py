"""``aiko compare A.mcap B.mcap --json --plot OUT.png``: align two runs and measure how they differ."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from aiko.analysis.compare import compare_logs
from aiko.commands import SUMMARIES


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help=SUMMARIES["compare"],
        description="Align run B to run A in time (start events, refined by cross-correlation of the tracked "
        "point's velocity) and in space (start offset), then report displacements, distance ratio B/A, RMS "
        "position error and joint tracking. Occluded motion-capture samples are skipped and counted.",
    )
    p.add_argument("a", type=Path, help="run A (e.g. the real robot)")
    p.add_argument("b", type=Path, help="run B (e.g. its replay in simulation)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--plot", type=Path, metavar="OUT.png", help="back-to-back figure (A solid, B dashed)")
    p.add_argument("--max-lag", type=float, default=0.5, metavar="S", help="largest time offset searched (0.5 s)")
    p.add_argument(
        "--start-window",
        type=float,
        default=0.5,
        metavar="S",
        help="seconds at the start over which the position offset is measured (0.5 s)",
    )
    p.add_argument("--topic", default=None, help="tracked-point channel (default: /mocap, else /mocap/tracked_point)")
    p.add_argument("--body", type=int, default=0, help="which tracked body of the channel (default 0)")
    p.add_argument("--labels", nargs=2, default=("A (real)", "B (sim)"), metavar=("A", "B"), help="plot legend")
    p.set_defaults(handler=run_compare)


def run_compare(args: argparse.Namespace) -> int:
    from aiko.core.errors import AikoError

    if not 0 < args.max_lag <= 60:
        raise AikoError(f"--max-lag must be in (0, 60] s, got {args.max_lag}")
    if not 0 < args.start_window <= 600:
        raise AikoError(f"--start-window must be in (0, 600] s, got {args.start_window}")
    cmp = compare_logs(
        args.a, args.b, max_lag_s=args.max_lag, start_window_s=args.start_window, body=args.body, topic=args.topic
    )
    if args.plot:
        from aiko.analysis.plots import plot_comparison

        cmp.result["plot"] = str(plot_comparison(cmp, args.plot, tuple(args.labels)))
    r = cmp.result
    if args.json:
        print(json.dumps(r))
        return 0
    print(f"time offset      {r['time_offset_s'] * 1e3:8.1f} ms (B lags A)")
    print(f"position offset  {', '.join(f'{v:.4f}' for v in r['position_offset_m'])} m")
    print(f"RMS position err {r['rms_position_error_m'] * 1e3:8.2f} mm over {r['samples_compared']} samples")
    for key in ("run_a", "run_b"):
        d = r[key]
        heading = "n/a" if d["heading_deg"] is None else f"{d['heading_deg']:.1f} deg"
        print(f"{key}: distance {d['distance_m']:.4f} m, heading {heading}")
    print(f"distance ratio B/A {r['distance_ratio']}")
    print(f"occluded samples skipped: A {r['occluded_samples']['a']}, B {r['occluded_samples']['b']}")
    return 0
