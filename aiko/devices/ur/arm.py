"""Our UR3 driver: ur_rtde's control and receive interfaces behind our own safety checks.

The controller has its own safety system; these checks come first so a bad target never leaves the PC:

* a workspace box for the TCP (every moveL / servoL target, before it is sent);
* a TCP speed limit (moveL's speed; for servoL the speed implied by the step from the previous target over the
  servo period) and a TCP acceleration limit (moveL's acceleration);
* a flange force limit: a callable returning the latest force magnitude in newtons (e.g.
  :meth:`UR3Arm.tcp_force_n`, or an external load cell's reader) is read before every command and while a move
  runs; above the limit the arm is stopped and :class:`ForceLimitExceeded` raised.

Every exit path stops the arm and disconnects: ``close()``, the context manager's exit on success, on an
exception and on KeyboardInterrupt. ur_rtde is imported lazily (the ``ur`` extra).
"""

from __future__ import annotations

import ctypes
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from aiko.core.errors import AikoError, ConfigError, HardwareError, RunStopped

INSTALL_HINT = "pip install aiko-stack[ur]"


class UnsafeTarget(AikoError):
    """A command our limits refuse; nothing was sent to the arm."""


class ForceLimitExceeded(RunStopped):
    """The flange force went over the limit: the arm was stopped."""


def _import_ur_rtde() -> tuple[Any, Any]:
    try:
        import rtde_control
        import rtde_receive
    except ImportError:
        raise AikoError(f"the UR driver needs ur_rtde (the 'ur' extra): {INSTALL_HINT}") from None
    return rtde_control, rtde_receive


@dataclass(frozen=True)
class ArmLimits:
    """Our limits, checked before anything is sent (SI units)."""

    workspace_min_m: tuple[float, float, float] = (-0.45, -0.45, 0.05)
    workspace_max_m: tuple[float, float, float] = (0.45, 0.45, 0.60)
    tcp_speed_max_m_s: float = 0.25
    tcp_accel_max_m_s2: float = 1.5
    force_max_n: float = 30.0
    stop_decel_m_s2: float = 2.0

    def __post_init__(self) -> None:
        if any(lo >= hi for lo, hi in zip(self.workspace_min_m, self.workspace_max_m, strict=True)):
            raise ConfigError(f"workspace box min {self.workspace_min_m} must lie below max {self.workspace_max_m}")
        for name in ("tcp_speed_max_m_s", "tcp_accel_max_m_s2", "force_max_n", "stop_decel_m_s2"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")

    def check_position(self, pose: Sequence[float]) -> None:
        pos = np.asarray(pose[:3], dtype=float)
        if np.any(pos < self.workspace_min_m) or np.any(pos > self.workspace_max_m):
            raise UnsafeTarget(
                f"target TCP {np.round(pos, 4).tolist()} m outside the workspace box "
                f"{list(self.workspace_min_m)}..{list(self.workspace_max_m)}; not sent"
            )


@dataclass(frozen=True)
class ArmState:
    """One read of the arm's state (RTDE outputs)."""

    timestamp_s: float
    tcp_pose: tuple[float, ...]
    tcp_speed: tuple[float, ...]
    q_rad: tuple[float, ...]
    safety_mode: int
    robot_mode: int
    runtime_state: int
    protective_stopped: bool

    def as_payload(self) -> dict[str, Any]:
        """A JSON-able dict for the log."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}


def _disconnect_side_by_side(slots: list[list[Any]]) -> None:
    """Disconnect ur_rtde interfaces, each in a thread of its own; ``slots`` holds each interface in a one-element
    list, the caller's only reference, which the thread takes out.

    Why threads: ur_rtde 1.6.5's ``disconnect()`` ends by sleeping 500 ms ("wait until everything has disconnected",
    ``src/rtde_control_interface.cpp`` and ``src/rtde_receive_interface.cpp``); the bindings release the GIL while
    it sleeps, so the two sleep side by side (0.5 s, not 1 s). A disconnect that fails (a controller already gone)
    is not an error on the way out: that interface is released, its destructor trying again. One that succeeded is
    kept (`_keep_until_exit`)."""

    def release(slot: list[Any]) -> None:
        interface = slot.pop()
        try:
            interface.disconnect()
        except RuntimeError:
            pass
        else:
            _keep_until_exit(interface)
        del interface  # the last reference of an interface not kept: its destructor runs in this thread

    threads = [threading.Thread(target=release, args=(slot,), name="ur-rtde-disconnect") for slot in slots]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _keep_until_exit(interface: Any) -> None:
    """Never destroy a ur_rtde interface that has disconnected: the process keeps it (a few kB) until it ends.

    Why: its destructor calls ``disconnect()`` again, which ends in the same unconditional 500 ms sleep — with the
    GIL held (pybind11 destroys objects with it; measured: a thread ticking every 10 ms ran once during the 0.5 s),
    so at every close each interface stopped every thread of the command for 0.5 s: 1 s of each HIL bench run's
    close, after the disconnects' own 0.5 s (issue 28). After a disconnect that returned there is nothing left for
    it to do: the RTDE, script and dashboard sockets are reset and the receive thread stopped (same sources). An
    extra reference through the C API, because a Python container would be emptied while the interpreter shuts down
    and the destructors would run (and sleep) then."""
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(interface))


class UR3Arm:
    """A UR3 over RTDE with our limits. Use as a context manager, or call ``connect()`` / ``close()``."""

    def __init__(
        self,
        host: str,
        limits: ArmLimits | None = None,
        force_n: Callable[[], float] | None = None,
        frequency_hz: float = 500.0,
        link_timeout_s: float = 2.0,
    ) -> None:
        self.host = host
        self.link_timeout_s = link_timeout_s
        self._stamp: tuple[float, float] | None = None  # (controller timestamp, monotonic time it was first seen)
        self.limits = limits or ArmLimits()
        self.frequency_hz = frequency_hz
        self._force_n = force_n
        self.control: Any = None
        self.receive: Any = None
        self._mode = "idle"  # idle | move | servo | speed
        self._last_servo_target: np.ndarray | None = None

    # --- lifecycle -----------------------------------------------------------------------------------------
    def connect(self) -> UR3Arm:
        rtde_control, rtde_receive = _import_ur_rtde()
        try:
            self.receive = rtde_receive.RTDEReceiveInterface(self.host, self.frequency_hz)
            self.control = rtde_control.RTDEControlInterface(self.host, self.frequency_hz)
        except RuntimeError as exc:
            self.close()
            raise HardwareError(f"cannot connect to the UR controller at {self.host}: {exc}") from None
        return self

    def __enter__(self) -> UR3Arm:
        return self.connect()

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the arm, then disconnect both interfaces (safe to call twice, and after a failed connect)."""
        try:
            self.stop()
        finally:
            slots = [[iface] for iface in (self.control, self.receive) if iface is not None]
            self.control = None
            self.receive = None
            _disconnect_side_by_side(slots)

    def stop(self) -> None:
        """Stop whatever runs: servoStop for a servo stream, speedStop for speed control, stopL otherwise."""
        c = self.control
        if c is None:
            return
        decel = self.limits.stop_decel_m_s2
        mode, self._mode = self._mode, "idle"
        self._last_servo_target = None
        if not self.link_alive():
            return  # nothing reaches a controller that is gone (ur_rtde would wait 300 s for its answer)
        try:
            if not c.isProgramRunning():
                return
            if mode == "servo":
                c.servoStop(decel)
            elif mode == "speed":
                c.speedStop(decel)
            else:
                c.stopL(decel)
        except RuntimeError:
            pass

    # --- state ---------------------------------------------------------------------------------------------
    def check_link(self) -> None:
        """Raise HardwareError when the controller is gone: an interface disconnected, or no new state for
        ``link_timeout_s`` (the controller's stream stalled or ur_rtde is reconnecting). A run must then stop with
        this error rather than wait on ur_rtde's reconnection, which retries on its own thread without end."""
        r, c = self._receive(), self._control()
        if not (r.isConnected() and c.isConnected()):
            raise HardwareError(f"lost the connection to the UR controller at {self.host}; run stopped")
        stamp, now = float(r.getTimestamp()), time.monotonic()
        if self._stamp is None or stamp != self._stamp[0]:
            self._stamp = (stamp, now)
        elif now - self._stamp[1] > self.link_timeout_s:
            raise HardwareError(
                f"no state from the UR controller at {self.host} for {now - self._stamp[1]:.1f} s (connection lost or "
                "controller stalled); run stopped"
            )

    def controller_time_s(self) -> float:
        """The controller's clock (RTDE ``timestamp``), after :meth:`check_link`: a run clocked by it stops with the
        link's error instead of waiting for a time that no longer advances."""
        self.check_link()
        return float(self._receive().getTimestamp())

    def link_alive(self) -> bool:
        try:
            self.check_link()
        except (HardwareError, AikoError, RuntimeError):
            return False
        return True

    def state(self) -> ArmState:
        self.check_link()
        r = self._receive()
        return ArmState(
            timestamp_s=float(r.getTimestamp()),
            tcp_pose=tuple(r.getActualTCPPose()),
            tcp_speed=tuple(r.getActualTCPSpeed()),
            q_rad=tuple(r.getActualQ()),
            safety_mode=int(r.getSafetyMode()),
            robot_mode=int(r.getRobotMode()),
            runtime_state=int(r.getRuntimeState()),
            protective_stopped=bool(r.isProtectiveStopped()),
        )

    def tcp_force_n(self) -> float:
        """Magnitude of the controller's TCP force estimate (``actual_TCP_force``), for ``force_n``."""
        return float(np.linalg.norm(self._receive().getActualTCPForce()[:3]))

    # --- commands ------------------------------------------------------------------------------------------
    def move_linear(self, pose: Sequence[float], speed_m_s: float, accel_m_s2: float, timeout_s: float = 60.0) -> None:
        """moveL to ``pose`` after our checks, watching the force limit while it runs; returns on arrival."""
        self.limits.check_position(pose)
        if not 0 < speed_m_s <= self.limits.tcp_speed_max_m_s:
            raise UnsafeTarget(f"moveL speed {speed_m_s} m/s outside (0, {self.limits.tcp_speed_max_m_s}]; not sent")
        if not 0 < accel_m_s2 <= self.limits.tcp_accel_max_m_s2:
            raise UnsafeTarget(
                f"moveL acceleration {accel_m_s2} m/s^2 outside (0, {self.limits.tcp_accel_max_m_s2}]; not sent"
            )
        self.check_force()
        c = self._control()
        self._mode = "move"
        if not c.moveL(list(map(float, pose)), speed_m_s, accel_m_s2, True):
            self._raise_not_done("moveL")
        deadline = time.monotonic() + timeout_s
        while c.getAsyncOperationProgress() >= 0:
            self.check_force()
            self.check_link()
            if self._receive().isProtectiveStopped():
                self._raise_not_done("moveL")
            if time.monotonic() > deadline:
                self.stop()
                raise HardwareError(f"moveL did not finish within {timeout_s:g} s; arm stopped")
            time.sleep(0.002)
        self._mode = "idle"
        self._catch_up()
        if self._receive().isProtectiveStopped():
            self._raise_not_done("moveL")

    def servo_linear(
        self,
        pose: Sequence[float],
        period_s: float = 0.002,
        lookahead_time_s: float = 0.1,
        gain: float = 300.0,
    ) -> None:
        """One servoL set-point after our checks (box, implied TCP speed from the previous set-point, force)."""
        target = np.asarray(pose, dtype=float)
        self.limits.check_position(target)
        previous = self._last_servo_target
        if previous is None:
            previous = np.asarray(self._receive().getActualTCPPose(), dtype=float)
        implied = float(np.linalg.norm(target[:3] - previous[:3])) / period_s
        if implied > self.limits.tcp_speed_max_m_s:
            raise UnsafeTarget(
                f"servoL step implies {implied:.3f} m/s, over the {self.limits.tcp_speed_max_m_s} m/s limit; not sent"
            )
        self.check_force()
        self.check_link()
        self._mode = "servo"
        try:
            done = self._control().servoL(target.tolist(), 0.5, 0.5, period_s, lookahead_time_s, gain)
        except RuntimeError as exc:  # ur_rtde lost the connection and could not get it back
            message = f"lost the connection to the UR controller at {self.host}: {exc}; run stopped"
            raise HardwareError(message) from None
        if not done:
            self._raise_not_done("servoL")
        self._last_servo_target = target

    def check_force(self) -> None:
        """Read the force callable; over the limit, stop the arm and raise ForceLimitExceeded."""
        if self._force_n is None:
            return
        force = float(self._force_n())
        if not math.isfinite(force) or force > self.limits.force_max_n:
            self.stop()
            raise ForceLimitExceeded(
                f"flange force {force:.1f} N over the {self.limits.force_max_n:g} N limit: arm stopped",
                {"force_n": force, "force_max_n": self.limits.force_max_n},
            )

    def unlock_protective_stop(self) -> None:
        """Release a protective stop through the dashboard server (ur_rtde's own ``DashboardClient``, which raises
        on any reply but "Protective stop releasing") and re-upload the control script."""
        import dashboard_client

        dash = dashboard_client.DashboardClient(self.host)
        try:
            dash.connect()
            dash.unlockProtectiveStop()
        except RuntimeError as exc:  # ur_rtde raises std::logic_error / runtime_error as RuntimeError
            raise HardwareError(f"unlock protective stop refused: {exc}") from None
        finally:
            dash.disconnect()
        time.sleep(0.05)
        if not self._control().reuploadScript():
            raise HardwareError("control script re-upload failed after unlocking the protective stop")
        deadline = time.monotonic() + 5.0
        while not self._control().isProgramRunning():
            if time.monotonic() > deadline:
                raise HardwareError("control script did not start after unlocking the protective stop")
            time.sleep(0.01)

    # --- helpers -------------------------------------------------------------------------------------------
    def _catch_up(self, timeout_s: float = 0.5) -> None:
        """Wait until the receive interface holds a state published after now: it is a separate connection with
        its own thread, so right after the control interface reports an end it may still hold an older package."""
        r = self._receive()
        t0 = float(r.getTimestamp())
        deadline = time.monotonic() + timeout_s
        while float(r.getTimestamp()) < t0 + 1.5 / self.frequency_hz and time.monotonic() < deadline:
            time.sleep(0.001)

    def _control(self) -> Any:
        if self.control is None:
            raise AikoError("UR3Arm is not connected: use it as a context manager or call connect()")
        return self.control

    def _receive(self) -> Any:
        if self.receive is None:
            raise AikoError("UR3Arm is not connected: use it as a context manager or call connect()")
        return self.receive

    def _raise_not_done(self, what: str) -> None:
        self._mode = "idle"
        if self.receive is not None and self.receive.isProtectiveStopped():
            raise RunStopped(f"{what}: the controller is in a protective stop", {"safety_mode": 3})
        self.stop()
        raise HardwareError(f"{what} was not executed by the controller (control script not running?)")
