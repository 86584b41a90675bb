"""What can go wrong with a real Vicon stream, injectable into the emulated one.

- occlusion: named segments (and their markers) or markers left out of frames, always or in a time window;
- dropouts: a fraction of frames never sent (their frame numbers are skipped, as when Tracker drops frames);
- latency: each frame sent ``latency_s`` after its capture, and the same figure reported in LatencyInfo;
- restarts: the listening socket and every client connection closed every ``restart_every_s`` and reopened
  after ``restart_downtime_s`` (Tracker restarted, a cable pulled).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from aiko.core.errors import ConfigError

_OCCLUSION = re.compile(r"^(?:(?P<subject>[^/@]+)/)?(?P<name>[^/@]+)(?:@(?P<start>[0-9.]*)-(?P<end>[0-9.]*))?$")


@dataclass(frozen=True)
class Occlusion:
    """``name`` (a segment or a marker) of ``subject`` (None: any subject) unseen for start_s ≤ t < end_s."""

    name: str
    subject: str | None = None
    start_s: float = 0.0
    end_s: float = math.inf

    def active(self, subject: str, t_s: float) -> bool:
        return (self.subject is None or self.subject == subject) and self.start_s <= t_s < self.end_s


def parse_occlusions(spec: str) -> tuple[Occlusion, ...]:
    """``"link3,aiko/link7@2-4.5,link9@10-"`` → occlusions (times in seconds since the server started)."""
    out = []
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        m = _OCCLUSION.match(item)
        if m is None:
            raise ConfigError(f"--occlude: cannot read {item!r}; expected [SUBJECT/]NAME[@START_S-END_S] (link3@2-4)")
        try:
            start = float(m["start"]) if m["start"] else 0.0
            end = float(m["end"]) if m["end"] else math.inf
        except ValueError:
            raise ConfigError(f"--occlude: {item!r}: the times must be numbers of seconds") from None
        if end <= start:
            raise ConfigError(f"--occlude: {item!r}: the window ends before it starts")
        out.append(Occlusion(m["name"], m["subject"], start, end))
    return tuple(out)


@dataclass(frozen=True)
class Impairments:
    occlusions: tuple[Occlusion, ...] = ()
    dropout_fraction: float = 0.0
    latency_s: float = 0.0
    restart_every_s: float | None = None
    restart_downtime_s: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.dropout_fraction < 1.0:
            raise ConfigError(f"dropout fraction must be in [0, 1), got {self.dropout_fraction}")
        if not 0.0 <= self.latency_s <= 5.0:
            raise ConfigError(f"latency must be in 0..5000 ms, got {self.latency_s * 1e3:g} ms")
        if self.restart_every_s is not None and self.restart_every_s <= self.restart_downtime_s:
            raise ConfigError(
                f"restart every {self.restart_every_s:g} s must be longer than the downtime "
                f"{self.restart_downtime_s:g} s"
            )
        if self.restart_downtime_s < 0:
            raise ConfigError(f"restart downtime must be ≥ 0 s, got {self.restart_downtime_s}")

    def hidden(self, subject: str, t_s: float) -> set[str]:
        """Names (segments or markers) of ``subject`` unseen at ``t_s``."""
        return {o.name for o in self.occlusions if o.active(subject, t_s)}
