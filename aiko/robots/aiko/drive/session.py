"""A driven run: operator inputs → steering commands → the steerable gait, each command recorded as a channel.

The run itself is ``aiko run``'s (``aiko.robots.aiko.run.record_run``): the same backend lifecycle, e-stop, module
watchdog and safety stops. A driven run adds two things:

- a **drive task** on the run clock, just before the references at each reference deadline: it takes what the input
  device produced since the last tick, turns it into absolute commands (``speed 1.3``, never "faster"), hands them to
  the gait at this tick's time and records each on ``/drive/commands`` (:data:`COMMANDS_CHANNEL`), so the
  log says exactly what the operator did and when, and :func:`aiko.robots.aiko.drive.export.driven_experiment`
  turns it back into an experiment that runs the same references again;
- a thin wrapper around the backend (:class:`DrivenBackend`) that remembers the latest feedback for the status line
  and can fall silent: **an input that is lost** (the terminal closed, the gamepad unplugged, Foxglove
  disconnected) first pauses the gait (the wave stops where it is and the robot holds), and if it does not come
  back within ``lost_hold_s`` the PC stops sending references; the modules' own watchdog then disables their drives
  and the run stops on it, as it would if this PC had died. A backend without a watchdog (the simulators) is stopped
  by the drive task after the same watchdog time. Never does a lost input leave the last command running.
"""

from __future__ import annotations

import logging
import math
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aiko.core.errors import RunStopped
from aiko.core.interfaces import Recorder
from aiko.core.loop import PeriodicTask
from aiko.core.messages import Channel, Message, boolean, number, string
from aiko.robots.aiko.gaits.steerable import DriveCommand, SteerableGait
from aiko.robots.aiko.joints import JointFeedback, JointInterface, JointReferences, JointStatus, RunContext

log = logging.getLogger(__name__)

COMMANDS_CHANNEL = Channel("/drive/commands", Message(
    "aiko.DriveCommand",
    "An operator command of a driven run, at the run time it took effect (aiko drive).",
    {
        "t_s": number("run time the command took effect", "s"),
        "command": string("speed | turn | gait | pause | resume | stop"),
        "value": number("speed factor or turn fraction (0 for the other commands)"),
        "gait": string("the gait switched to (command gait), else empty"),
        "source": string("keyboard | gamepad | foxglove | script | input"),
    },
))  # fmt: skip
STATUS_CHANNEL = Channel("/drive/status", Message(
    "aiko.DriveStatus",
    "The steering state at each reference tick of a driven run.",
    {
        "t_s": number("run time", "s"),
        "gait": string("the running gait"),
        "blending": boolean("a gait switch is being blended"),
        "speed": number("commanded speed factor (x the gait's own frequency)"),
        "frequency_deg_s": number("the running wave's frequency now", "deg/s"),
        "turn": number("commanded turn, -1 .. 1"),
        "turn_deg": number("commanded psi_h", "deg"),
        "paused": boolean("the gait is paused"),
        "input_ok": boolean("false while the input device is lost"),
    },
))  # fmt: skip


@dataclass(frozen=True)
class Intent:
    """What an input device asks for, before it is made absolute against the steering state.

    ``kind``: ``speed_step`` / ``turn_step`` (value ±1: one step), ``speed`` / ``turn`` (absolute value), ``gait``
    (a name), ``pause_toggle``, ``pause``, ``resume``, ``centre`` (turn 0), ``stop``, ``lost``, ``restored``."""

    kind: str
    value: float | str | None = None


class InputDevice:
    """An operator input: a thread (or server) that puts :class:`Intent` objects on ``intents``.

    ``lost`` is an intent like any other, so that the order of what the operator did and when the device went away
    is kept."""

    name = "input"

    def __init__(self) -> None:
        self.intents: queue.Queue[Intent] = queue.Queue()

    def start(self) -> None:
        """Start listening (open the device); raise an AikoError with one line if it cannot."""

    def close(self) -> None:
        """Stop listening and release the device."""

    def show_status(self, line: str) -> None:
        """The status line, where the device has a place for it (the keyboard's terminal)."""


class DrivenBackend(JointInterface):
    """The run's backend, unchanged, except that it keeps the latest feedback and can stop sending references."""

    def __init__(self, inner: JointInterface) -> None:
        self.inner = inner
        self.name = inner.name
        self.silent = False
        self.latest_feedback: JointFeedback | None = None
        self.recorder: Recorder | None = None
        self.ctx: RunContext | None = None

    def configure(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.recorder = ctx.recorder
        declare = getattr(_file_recorder(ctx.recorder), "declare", None)
        if callable(declare):  # in the log from the start, even if the operator commands nothing
            declare(COMMANDS_CHANNEL)
            declare(STATUS_CHANNEL)
        self.inner.configure(ctx)

    def activate(self) -> None:
        self.inner.activate()

    def write(self, command: JointReferences) -> None:
        self.inner.write(command)

    def streaming(self) -> bool:
        return not self.silent and self.inner.streaming()

    def read(self) -> JointFeedback:
        feedback = self.inner.read()
        self.latest_feedback = feedback
        return feedback

    def advance_to(self, t_s: float) -> None:
        self.inner.advance_to(t_s)

    def deactivate(self) -> None:
        self.inner.deactivate()

    def emergency_stop(self) -> None:
        self.inner.emergency_stop()

    def summary(self) -> dict[str, Any]:
        return self.inner.summary()

    def close(self) -> None:
        self.inner.close()

    def link_poses(self):  # type: ignore[no-untyped-def]
        return self.inner.link_poses()

    def stale_modules(self) -> list[int]:
        return self.inner.stale_modules()

    def disabled_modules(self) -> list[int]:
        return self.inner.disabled_modules()


def _file_recorder(recorder: Any) -> Any:
    """The first recorder of a fan-out that registers channels ahead of their messages (the log file)."""
    for inner in getattr(recorder, "recorders", [recorder]):
        if hasattr(inner, "declare"):
            return inner
    return recorder


class OperatorStop(KeyboardInterrupt):
    """The operator's stop, once the robot stands still: the run ends as a Ctrl-C does (modules disabled, log
    closed, report written), and the summary says it was the operator's stop."""


@dataclass
class DriveSettings:
    speed_step: float = 0.1
    turn_step: float = 0.25
    lost_hold_s: float = 2.0  # a lost input holds the robot this long before the references stop
    watchdog_s: float = 0.3  # how long the modules take to stop after the last reference (3 periods at 10 Hz)
    status_rate_hz: float = 4.0


@dataclass
class DriveSession:
    """The drive task and its state; see the module docstring."""

    gait: SteerableGait
    backend: DrivenBackend
    device: InputDevice
    settings: DriveSettings = field(default_factory=DriveSettings)
    status_sink: Callable[[str], None] | None = None
    commands: list[DriveCommand] = field(default_factory=list)
    input_ok: bool = True
    lost_since_s: float | None = None
    silent_since_s: float | None = None
    stopped_by: str | None = None
    _last_status_wall: float = 0.0
    _state: dict[str, Any] | None = None
    _started: bool = False

    def task(self, rate_hz: float) -> PeriodicTask:
        # before the references (20) and after the feedback (10): the command takes effect in this tick's reference
        return PeriodicTask("drive", rate_hz, self.tick, priority=15)

    # -- the task
    def tick(self, t_s: float) -> None:
        first = not self._started
        self._started = True
        ignored = 0
        while True:
            try:
                intent = self.device.intents.get_nowait()
            except queue.Empty:
                break
            if first and intent.kind not in ("lost", "restored"):
                ignored += 1  # pressed while the modules were being enabled: not meant for a moving robot
                continue
            self._handle(intent, t_s)
        if ignored:
            log.warning("%d input(s) given before the run started were ignored", ignored)
            self._event("inputs_ignored", t_s, count=ignored)
        self._watch_lost(t_s)
        if self.gait.stopping and self.gait.standing_still():
            self.stopped_by = "operator"
            self._event("operator_stop", t_s)
            raise OperatorStop
        self._record_status(t_s)

    def _handle(self, intent: Intent, t_s: float) -> None:
        kind, value, source = intent.kind, intent.value, self.device.name
        if kind == "lost":
            if self.input_ok:
                self.input_ok = False
                self.lost_since_s = t_s
                log.warning("input %s lost at t = %.2f s: pausing (%s)", source, t_s, value or "")
                self._event("input_lost", t_s, device=source, reason=str(value or ""))
                self._issue(DriveCommand(t_s, "pause", None, "input"))
            return
        if kind == "restored":
            if not self.input_ok and self.silent_since_s is None:
                self.input_ok = True
                self.lost_since_s = None
                self._event("input_restored", t_s, device=source)
            return
        if not self.input_ok:
            return  # nothing from a device that went away steers the robot until it is back
        status = self._commanded()
        s = self.settings
        if kind == "speed_step":
            target = round(status["speed"] + s.speed_step * float(value), 6)
            self._issue(DriveCommand(t_s, "speed", target, source))
        elif kind == "turn_step":
            target = float(np.clip(round(status["turn"] + s.turn_step * float(value), 6), -1.0, 1.0))
            self._issue(DriveCommand(t_s, "turn", target, source))
        elif kind == "centre":
            self._issue(DriveCommand(t_s, "turn", 0.0, source))
        elif kind in ("speed", "turn"):
            self._issue(DriveCommand(t_s, kind, float(value), source))
        elif kind == "pause_toggle":
            self._issue(DriveCommand(t_s, "resume" if status["paused"] else "pause", None, source))
        elif kind in ("pause", "resume", "stop"):
            self._issue(DriveCommand(t_s, kind, None, source))
        elif kind == "gait":
            self._issue(DriveCommand(t_s, "gait", str(value), source))

    def _commanded(self) -> dict[str, Any]:
        """The steering state as commanded so far (the gait takes a command on its next grid step: two key presses
        in one tick must build on each other, not both on the gait's state before them)."""
        if self._state is None:
            status = self.gait.status()
            self._state = {"speed": status["speed"], "turn": status["turn"], "paused": status["paused"]}
        return self._state

    def _issue(self, cmd: DriveCommand) -> None:
        status = self._commanded()
        if cmd.command == "speed":
            cmd = DriveCommand(cmd.t_s, "speed", float(np.clip(cmd.value, -self.gait.limits.max_speed,
                                                               self.gait.limits.max_speed)), cmd.source)  # fmt: skip
            if cmd.value == status["speed"]:
                return
        if cmd.command == "turn":
            cmd = DriveCommand(cmd.t_s, "turn", float(np.clip(cmd.value, -1.0, 1.0)), cmd.source)
            if cmd.value == status["turn"]:
                return
        if cmd.command in ("speed", "turn"):
            status[cmd.command] = cmd.value
        elif cmd.command in ("pause", "stop"):
            status["paused"] = True
        elif cmd.command == "resume":
            status["paused"] = bool(self.gait.stopping) or any(c.command == "stop" for c in self.commands)
        self.gait.command(cmd)
        self.commands.append(cmd)
        if self.backend.recorder is not None:
            self.backend.recorder.record(COMMANDS_CHANNEL, self._now_ns(), cmd.as_payload())

    def _watch_lost(self, t_s: float) -> None:
        s = self.settings
        if self.input_ok or self.lost_since_s is None:
            return
        if self.silent_since_s is None and t_s - self.lost_since_s >= s.lost_hold_s:
            self.silent_since_s = t_s
            self.backend.silent = True
            log.error("input %s still lost after %.1f s: references stopped", self.device.name, s.lost_hold_s)
            self._event("references_stopped", t_s, reason="input_lost", held_s=round(t_s - self.lost_since_s, 3))
        if self.silent_since_s is not None and t_s - self.silent_since_s >= s.watchdog_s + 0.5:
            # the modules' watchdog has had its time (the control loop stops the run when they report it); a
            # backend without one (a simulator) is stopped here, the same way
            self.stopped_by = "input_lost"
            raise RunStopped(
                f"input {self.device.name} lost at t = {self.lost_since_s:.2f} s: the robot held for "
                f"{s.lost_hold_s:g} s, then the references stopped; run stopped",
                {"reasons": ["input_lost"], "t_s": float(t_s)},
            )

    def _record_status(self, t_s: float) -> None:
        status = self.gait.status()
        if self.backend.recorder is not None:
            payload = {
                "t_s": t_s,
                **{k: status[k] for k in ("gait", "blending", "speed", "frequency_deg_s", "turn", "turn_deg")},
                "paused": bool(status["paused"]),
                "input_ok": self.input_ok,
            }
            self.backend.recorder.record(STATUS_CHANNEL, self._now_ns(), payload)
        now = time.monotonic()
        if now - self._last_status_wall >= 1.0 / self.settings.status_rate_hz:
            self._last_status_wall = now
            line = self.status_line(t_s)
            self.device.show_status(line)
            if self.status_sink is not None:
                self.status_sink(line)

    def status_line(self, t_s: float) -> str:
        """gait, speed, heading (turn), module states, bus health: one terminal line."""
        # what was commanded (the gait takes it on its next grid step: the line must not lag a key by a tick)
        st = {**self.gait.status(), **self._commanded()}
        gait = st["gait"] + ("…" if st["blending"] else "") + (f" → {st['pending_gait']}" if st["pending_gait"] else "")
        state = "STOPPING" if st["stopping"] else "PAUSED" if st["paused"] else "RUN"
        if not self.input_ok:
            state = "INPUT LOST" + (" (refs stopped)" if self.silent_since_s is not None else " (holding)")
        modules = module_states(self.backend.latest_feedback)
        frequency = int(round(st["frequency_deg_s"]))  # never "-0"
        return (
            f"t {t_s:6.1f} s | {state:<8} | gait {gait:<20} | speed {st['speed']:+.2f} ({frequency:+d} "
            f"deg/s) | turn {st['turn']:+.2f} ({st['turn_deg']:+.1f} deg) | modules {modules} | bus {self._bus()}"
            + (f" | late ticks {LateTicks.count}" if LateTicks.count else "")
            + (f" | emulator behind real time {LateTicks.emulator_behind}×" if LateTicks.emulator_behind else "")
        )

    def _bus(self) -> str:
        inner = self.backend.inner
        driver = getattr(inner, "driver", None)
        if driver is None:
            return "n/a"
        return f"tx {driver.frames_sent} rx {driver.frames_received} bad {driver.bad_frames}"

    def _event(self, kind: str, t_s: float, **fields: Any) -> None:
        if self.backend.recorder is not None:
            self.backend.recorder.event(kind, self._now_ns(), t_s=t_s, **fields)

    def _now_ns(self) -> int:
        ctx = self.backend.ctx
        return ctx.clock.now_ns() if ctx is not None else time.monotonic_ns()


class LateTicks(logging.Filter):
    """Keeps the loop's "deadline missed" warnings and the HIL emulator's "fell behind real time" warnings off the
    driver's terminal (on a loaded PC they come many times a second and bury the status line) and counts them for
    it; the log's ``deadline_missed`` events keep every late tick."""

    count = 0
    emulator_behind = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "aiko.core.loop" and "deadline(s) missed" in str(record.msg):
            LateTicks.count += 1
            return False
        if record.name.startswith("firmware_protocol.emulator") and "behind real time" in str(record.msg):
            LateTicks.emulator_behind += 1
            return False
        return True


def module_states(feedback: JointFeedback | None) -> str:
    """``10 EN`` or ``8 EN, 2 WD`` …: how many modules report each state."""
    if feedback is None:
        return "-"
    status = np.asarray(feedback.status, dtype=np.int64)
    counts: dict[str, int] = {}
    for s in status:
        if s & JointStatus.WATCHDOG:
            name = "WD"
        elif s & JointStatus.FAULT:
            name = "FAULT/ESTOP"
        elif s & JointStatus.ENABLED:
            name = "EN"
        else:
            name = "off"
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in counts.items())


def limit_note(limits: Any) -> str:
    return (
        f"rate ≤ {math.degrees(limits.rate_rad_s):.0f} deg/s, acceleration ≤ {math.degrees(limits.accel_rad_s2):.0f} "
        f"deg/s², speed ≤ {limits.max_speed:g}×, turn ≤ {math.degrees(limits.max_turn_rad):.0f} deg"
    )
