"""Per-module health from the feedback stream: age of the last frame, enabled, faults, watchdog, e-stop.

Transitions are logged once (a warning names the node and what changed) and handed to a callback, so the run
log gets an event; the loop keeps running: what to do about a sick module is the operator's call.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

# A gap between two checks this many times the usual one (and past the timeout) is this process's own stall.
OWN_STALL_INTERVALS = 3.0


@dataclass
class ModuleHealth:
    node: int
    last_feedback_s: float = -math.inf
    enabled: bool = False
    fault: bool = False
    watchdog: bool = False
    estop: bool = False
    at_limit: bool = False
    saturated: bool = False
    stale: bool = True
    feedback_frames: int = 0
    lost_enable: bool = False  # was enabled, then reported disabled without a fault of its own

    def age_s(self, now_s: float) -> float:
        return now_s - self.last_feedback_s

    def as_dict(self, now_s: float) -> dict:
        age = self.age_s(now_s)
        return {
            "node": self.node,
            "feedback_age_s": age if math.isfinite(age) else None,
            "enabled": self.enabled,
            "fault": self.fault,
            "watchdog": self.watchdog,
            "estop": self.estop,
            "stale": self.stale,
            "feedback_frames": self.feedback_frames,
        }


TransitionCallback = Callable[[str, int, dict], None]


class HealthMonitor:
    """Keeps a `ModuleHealth` per node; reports transitions (fault, watchdog, e-stop, stale, recovered)."""

    def __init__(self, nodes: tuple[int, ...], stale_after_s: float, on_transition: TransitionCallback | None = None):
        self.modules = {node: ModuleHealth(node) for node in nodes}
        self.stale_after_s = stale_after_s
        self.on_transition = on_transition
        self.transitions = 0
        self.own_stalls = 0  # checks that came after this process itself had not run for longer than stale_after_s
        self._last_check_s: float | None = None
        self._usual_check_interval_s: float | None = None  # a running mean of the gaps between checks, stalls aside

    def _report(self, kind: str, node: int, **fields) -> None:
        self.transitions += 1
        log.warning("joint module %d: %s %s", node, kind.replace("_", " "), fields or "")
        if self.on_transition is not None:
            self.on_transition(kind, node, fields)

    def on_feedback(self, node: int, now_s: float, flags: dict[str, int]) -> None:
        m = self.modules[node]
        m.last_feedback_s = now_s
        m.feedback_frames += 1
        if m.stale and m.feedback_frames > 1:
            self._report("module_feedback_recovered", node)
        m.stale = False
        for name, key in (("fault", "Fault"), ("watchdog", "Watchdog"), ("estop", "EStop")):
            value = bool(flags[key])
            if value and not getattr(m, name):
                self._report(f"module_{name}", node)
            setattr(m, name, value)
        enabled = bool(flags["Enabled"])
        if m.enabled and not enabled and not (m.fault or m.watchdog or m.estop):
            m.lost_enable = True  # disabled by someone else (a stray Disable, a module reset): not our doing
            self._report("module_disabled", node)
        m.enabled = enabled
        m.at_limit = bool(flags["AtLimit"])
        m.saturated = bool(flags["Saturated"])

    def reset(self, now_s: float) -> None:
        """Start watching at now_s: a module that has not reported within `stale_after_s` from here is stale."""
        for m in self.modules.values():
            m.last_feedback_s = max(m.last_feedback_s, now_s) if m.feedback_frames else now_s
            m.stale = False
        self._last_check_s = now_s

    def check(self, now_s: float) -> None:
        """Flag modules whose last feedback is older than `stale_after_s` (once per episode).

        Unless this process itself did not run for longer than that (SIGSTOP, swapping, a PC stalled 1.5 s): the
        modules' frames of the stall then wait in the receive queue, and the checker, woken first, would call every
        module silent before the receive thread has delivered them (the 1.5 s stall probe stopped every run as
        ``feedback_stale``). After such a stall every module that was not already stale gets a fresh window from
        now: one that really went silent is reported ``stale_after_s`` later, and the modules' own watchdog, which
        no PC stall delays, protects the robot meanwhile."""
        last, self._last_check_s = self._last_check_s, now_s
        gap_s = now_s - last if last is not None else 0.0
        usual_s = self._usual_check_interval_s
        # a stall is a gap past the timeout *and* far past the usual interval: a configuration whose checks come
        # further apart than its timeout (feedback at 10 Hz, a 50 ms timeout) is judged at every check as before
        if usual_s is not None and gap_s > self.stale_after_s and gap_s > OWN_STALL_INTERVALS * usual_s:
            self.own_stalls += 1
            log.info("no health check for %.3f s (this process stalled): modules judged from now", gap_s)
            for m in self.modules.values():
                if not m.stale:
                    m.last_feedback_s = max(m.last_feedback_s, now_s)
            return
        if last is not None:
            self._usual_check_interval_s = gap_s if usual_s is None else 0.9 * usual_s + 0.1 * gap_s
        for m in self.modules.values():
            if not m.stale and m.age_s(now_s) > self.stale_after_s:
                m.stale = True
                self._report("module_feedback_stale", m.node, age_s=round(m.age_s(now_s), 4))

    def snapshot(self, now_s: float) -> list[dict]:
        return [m.as_dict(now_s) for m in self.modules.values()]
