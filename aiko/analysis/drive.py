"""What a driven run asked of the joints: the references' largest jump, rate and acceleration against the limits
the steerable gait kept (``aiko drive``'s metadata), and the operator's commands, for the report and for
``benchmarks/drive_session.py``."""

from __future__ import annotations

from typing import Any

import numpy as np

from aiko.log import LogReader

COMMANDS_CHANNEL = "/drive/commands"


def reference_extremes(reader: LogReader) -> dict[str, Any] | None:
    """Largest |Δα| between consecutive references, largest rate (the feed-forward the modules get, and Δα/Δt), and
    largest acceleration (Δ of the feed-forward rate over Δt), in degrees; with the limits of a driven run."""
    if not reader.has("/references"):
        return None
    refs = [p for _, p in reader.messages("/references")]
    if len(refs) < 3:
        return None
    t = np.array([p["t_s"] for p in refs])
    angle = np.degrees(np.array([[*p["angle_h_rad"], *p["angle_v_rad"]] for p in refs]))
    rate = np.degrees(np.array([[*p["rate_h_rad_s"], *p["rate_v_rad_s"]] for p in refs]))
    dt = np.diff(t)[:, None]
    period = float(np.median(dt))
    jump = np.abs(np.diff(angle, axis=0))
    # a jump is measured between references one period apart; after deadlines the loop skipped (a stalled or
    # loaded PC) the next reference is further away, and its step is in the rate between references instead
    regular = dt[:, 0] <= 1.5 * period
    jump_regular = jump[regular]
    out: dict[str, Any] = {
        "references": len(refs),
        "period_s": period,
        "gaps_longer_than_a_period": int((~regular).sum()),
        "largest_angle_deg": float(np.abs(angle).max()),
        "largest_jump_deg": float(jump_regular.max()) if jump_regular.size else float("nan"),
        "largest_jump_at_s": float(t[1:][regular][int(np.argmax(jump_regular.max(axis=1)))])
        if jump_regular.size
        else float("nan"),
        "largest_rate_feedforward_deg_s": float(np.abs(rate).max()),
        "largest_rate_between_references_deg_s": float((jump / dt).max()),
        "largest_acceleration_deg_s2": float((np.abs(np.diff(rate, axis=0)) / dt).max()),
    }
    drive = reader.run_metadata.get("aiko.drive")
    if isinstance(drive, dict):
        out["rate_limit_deg_s"] = float(drive["rate_limit_deg_s"])
        out["acceleration_limit_deg_s2"] = float(drive["accel_limit_deg_s2"])
        out["jump_limit_deg"] = out["rate_limit_deg_s"] * period
    return out


def command_rows(reader: LogReader) -> list[tuple[str, str]]:
    """One row per operator command: time, what, value, from which input."""
    if not reader.has(COMMANDS_CHANNEL):
        return []
    rows = []
    for _, c in reader.messages(COMMANDS_CHANNEL):
        what = c["command"]
        value = c["gait"] if what == "gait" else f"{c['value']:+.2f}" if what in ("speed", "turn") else ""
        rows.append((f"{c['t_s']:.1f} s", f"{what} {value} ({c['source']})".replace("  ", " ")))
    return rows
