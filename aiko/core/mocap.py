"""One interface for every motion-capture source (Vicon, OpenCV markers, simulated).

A source is polled by the control loop at ``rate_hz`` on the run's clock and must return at once: sources that
talk to hardware read it on their own thread and ``sample`` hands over the newest frame. An occluded or stale
body is NaN with ``occluded`` set, never zeros. ``capture_t_ns`` is when the pose was true on the run's clock
(receive time minus the measured latency), ``t_ns`` when the loop received it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aiko.core.messages import WXYZ, XYZ, Channel, Message, booleans, integer, number, string, strings, vectors

MOCAP_CHANNEL = Channel("/mocap", Message(
    "aiko.MocapSample",
    "One motion-capture sample as the control loop polled it: a pose per tracked body (body 0 is the run's "
    "tracked point), NaN (null) where occluded.",
    {
        "received_t_ns": integer("when the frame arrived, on the run clock (network sources)", "ns", optional=True),
        "reported_latency_s": number("latency the sender reported (Vicon LatencyInfo)", "s", optional=True),
        "capture_t_ns": integer("when the poses were true, on the run clock", "ns"),
        "latency_s": number("poll time minus capture time", "s"),
        "frame": integer("the source's frame number (-1: none)"),
        "source": string("vicon, opencv, simulated, ..."),
        "names": strings("the tracked bodies, in order"),
        "position_m": vectors("body positions, world frame; null where occluded", XYZ, "m"),
        "quaternion_wxyz": vectors("body orientations (unit quaternions); null where occluded or unknown", WXYZ),
        "occluded": booleans("true where the body was not seen (its pose is null)"),
    },
))  # fmt: skip
MOCAP_TOPIC = MOCAP_CHANNEL


@dataclass(frozen=True)
class MocapSample:
    t_ns: int
    capture_t_ns: int
    names: tuple[str, ...]
    position_m: np.ndarray  # (k, 3), NaN rows where occluded
    quaternion_wxyz: np.ndarray  # (k, 4), NaN rows where occluded or unknown
    occluded: np.ndarray  # (k,) bool
    frame: int = -1
    source: str = ""
    # Sources that receive frames over a network: when the frame arrived (run clock) and the latency the sender
    # reported (Vicon's LatencyInfo total); capture_t_ns = received_t_ns - reported latency.
    received_t_ns: int | None = None
    reported_latency_s: float | None = None

    @property
    def latency_s(self) -> float:
        return (self.t_ns - self.capture_t_ns) * 1e-9

    def payload(self) -> dict[str, Any]:
        """The ``/mocap`` log message: one entry per tracked body, body 0 is the run's tracked point."""
        extra: dict[str, Any] = {}
        if self.received_t_ns is not None:
            extra["received_t_ns"] = int(self.received_t_ns)
        if self.reported_latency_s is not None:
            extra["reported_latency_s"] = float(self.reported_latency_s)
        return {
            **extra,
            "capture_t_ns": int(self.capture_t_ns),
            "latency_s": self.latency_s,
            "frame": int(self.frame),
            "source": self.source,
            "names": list(self.names),
            "position_m": self.position_m,
            "quaternion_wxyz": self.quaternion_wxyz,
            "occluded": self.occluded,
        }


def occluded_sample(
    t_ns: int, names: tuple[str, ...], frame: int = -1, source: str = "", capture_t_ns: int | None = None
) -> MocapSample:
    k = len(names)
    return MocapSample(
        t_ns=t_ns,
        capture_t_ns=t_ns if capture_t_ns is None else capture_t_ns,
        names=names,
        position_m=np.full((k, 3), np.nan),
        quaternion_wxyz=np.full((k, 4), np.nan),
        occluded=np.ones(k, dtype=bool),
        frame=frame,
        source=source,
    )


@dataclass
class MocapEvent:
    kind: str
    t_ns: int
    fields: dict[str, Any] = field(default_factory=dict)


class MotionCapture(ABC):
    """Lifecycle: ``start()`` → ``sample(t_ns)`` at ``rate_hz`` → ``stop()`` (safe twice, on every exit path)."""

    rate_hz: float = 20.0
    names: tuple[str, ...] = ()

    def start(self) -> None:  # noqa: B027 - sources without a connection need nothing here
        """Connect / open the device. Sources without hardware need nothing."""

    @abstractmethod
    def sample(self, t_ns: int) -> MocapSample:
        """The newest pose(s) available at run time ``t_ns``; returns within milliseconds."""

    def stop(self) -> None:  # noqa: B027
        """Release the device; must be safe to call twice."""

    def pop_events(self) -> list[MocapEvent]:
        """Connection events (lost, reconnected, ...) since the last call, for the log's ``/events``."""
        return []

    def describe(self) -> dict[str, Any]:
        """What the log's metadata should say about this source (kind, bodies, rate, calibration, ...)."""
        return {"kind": type(self).__name__, "bodies": list(self.names), "rate_hz": self.rate_hz}

    def __enter__(self) -> MotionCapture:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class MocapTask:
    """Glue for the control loop: poll the source and write ``/mocap`` plus its events to the recorder."""

    def __init__(self, source: MotionCapture, recorder: Any, topic: Channel = MOCAP_CHANNEL) -> None:
        self.source = source
        self.recorder = recorder
        self.topic = topic
        self.samples = 0
        self.occluded = 0
        self.last: MocapSample | None = None

    def __call__(self, t_ns: int) -> MocapSample:
        sample = self.source.sample(int(t_ns))
        self.recorder.record(self.topic, sample.t_ns, sample.payload())
        for event in self.source.pop_events():
            self.recorder.event(event.kind, event.t_ns, **{"source": sample.source, **event.fields})
        self.samples += 1
        self.occluded += int(bool(sample.occluded[0])) if len(sample.occluded) else 0
        self.last = sample
        return sample

    def summary(self) -> dict[str, Any]:
        return {"mocap_samples": self.samples, "mocap_occluded_samples": self.occluded}
