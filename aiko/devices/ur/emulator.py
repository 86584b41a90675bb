"""A UR3 controller on a loopback address: the arm, its program and the three servers around them.

Enough of a UR controller for the unmodified ``ur_rtde`` client (``rtde_control``, ``rtde_receive``, ``rtde_io``,
``dashboard_client``) to connect, read state and move the simulated arm (:mod:`aiko.devices.ur.arm_sim`):

* RTDE on 30004 (:mod:`aiko.devices.ur.rtde_server`): recipes, inputs, data packages, text messages;
* the script ports 30001-30003 (:mod:`aiko.devices.ur.script_server`): ur_rtde's control script starts
  :class:`~aiko.devices.ur.control_script.ControlScript`;
* the dashboard on 29999 (:mod:`aiko.devices.ur.dashboard`).

This module is the controller between them: the tick (the program reads the period's inputs and sets the motion,
the motion advances one period, then the outputs are published), the program's state (playing, paused, stopped),
the robot's modes, the I/O and the speed slider the clients set, and what every RTDE output field holds. Fields the
emulator does not model (currents, joint torques and temperatures, voltages, ...) are NaN, never a made-up
constant or a stale value.

Threads, not asyncio: one accept thread per port, one thread per connection, one controller tick thread. The tick
holds the state lock for the step and packs every due data package; sockets are written outside the lock, without
blocking. The plant hook (:data:`aiko.devices.ur.arm_sim.PlantHook`) runs inside the tick. Library code: events go
to the ``log`` callable and to :mod:`logging`; the CLI (``aiko emulate ur3``) prints them.
"""

from __future__ import annotations

import logging
import math
import socket
import threading
import time
from collections.abc import Callable

import numpy as np

from aiko.core.errors import HardwareError
from aiko.devices.ur import arm_sim, dashboard, script_server
from aiko.devices.ur import kinematics as kin
from aiko.devices.ur import rtde_protocol as rp
from aiko.devices.ur.control_script import SCRIPT_MARKER, ControlScript, move_path, register_offset
from aiko.devices.ur.rtde_server import RTDE_PORT, RtdeConnection, RtdeServer
from aiko.devices.ur.script_server import SCRIPT_PORTS

logger = logging.getLogger(__name__)

DASHBOARD_PORT = 29999
# The least of each tick period the controller thread sleeps, however late it is (see `_tick_loop`).
MIN_IDLE_FRACTION = 0.2
__all__ = ["DASHBOARD_PORT", "RTDE_PORT", "SCRIPT_PORTS", "UR3Emulator"]

# runtime_state values (RTDE guide): STOPPING 0, STOPPED 1, PLAYING 2, PAUSING 3, PAUSED 4, RESUMING 5.
RUNTIME_STOPPED = 1
RUNTIME_PLAYING = 2
RUNTIME_PAUSED = 4
JOINT_RUNNING_MODE = 253
ROBOT_MODE_POWER_OFF, ROBOT_MODE_IDLE = 3, 5

CONTROLLER_VERSIONS = {
    # model -> (RTDE controller version, dashboard "PolyScopeVersion" reply)
    "ur3": ((3, 15, 8, 106339), "URSoftware 3.15.8.106339 (Jul 17 2023)"),
    "ur3e": ((5, 11, 1, 108318), "URSoftware 5.11.1.108318 (Nov 16 2021)"),
}

# Output fields the emulated arm does not model: served as NaN (doubles) so no client mistakes them for data.
UNMODELLED = (
    "target_current", "target_moment", "actual_current", "actual_current_as_torque", "actual_moment",
    "joint_control_output", "joint_temperatures", "actual_momentum", "actual_main_voltage", "actual_robot_voltage",
    "actual_robot_current", "actual_joint_voltage", "io_current", "tool_output_current", "tool_temperature",
    "standard_analog_input0", "standard_analog_input1", "tool_analog_input0", "tool_analog_input1",
    "payload_inertia",
)  # fmt: skip

# Analog outputs: a ratio in [0, 1] of 4-20 mA (current) or 0-10 V (voltage), published in A or V.
ANALOG_CURRENT_A = (0.004, 0.020)
ANALOG_VOLTAGE_V = (0.0, 10.0)


class UR3Emulator:
    """The emulated controller. ``start()`` binds the ports and runs; ``stop()`` closes everything."""

    def __init__(
        self,
        host: str,
        rate_hz: float = 500.0,
        model: str = "ur3",
        safety: arm_sim.SafetyConfig | None = None,
        plant: arm_sim.PlantHook | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.host = host
        self.rate_hz = float(rate_hz)
        self.dt = 1.0 / self.rate_hz
        self.sim = arm_sim.ArmSim(kin.MODELS[model], safety=safety, plant=plant)
        self.sim.step_time_s = self.dt
        self.version, self.polyscope_version = CONTROLLER_VERSIONS[model]
        self.model_name = kin.MODELS[model].name
        self.serial_number = "20180300000"
        self.robot_mode = arm_sim.ROBOT_MODE_RUNNING
        self.lock = threading.RLock()
        self.in_int = [0] * 48
        self.in_double = [0.0] * 48
        self.out_int = [0] * 48
        self.out_double = [math.nan] * 48  # nothing written yet: a getter's register holds no stale number
        self.inputs_other: dict[str, object] = {}
        self.digital_out_bits = 0  # bits 0-7 standard, 8-15 configurable, 16-17 tool (actual_digital_output_bits)
        self.analog_out_ratio = [0.0, 0.0]
        self.analog_out_voltage = [False, False]
        self.script: ControlScript | None = None
        self.held_by_dashboard = False  # "pause" on the dashboard
        self.last_stop_reason = ""
        self.shutdown_requested = threading.Event()
        self.rtde = RtdeServer(self)
        self._listeners: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._running = threading.Event()
        self._tick_count = 0
        self._states_built = 0  # state packages built so far (`_next_state`)
        self._log_sink = log
        self.counters = {"ticks": 0, "late_ticks": 0, "data_out": 0, "data_in": 0, "uploads": 0, "protective_stops": 0}
        # SCHED_FIFO priority the controller's threads run at (0: normal scheduling; `aiko emulate ur3 --rt-priority`
        # sets it once the system granted it): in the summary, so a run can tell a granted priority from a refused one
        self.rt_priority = 0
        self._was_pstopped = False
        self._pending_logs: list[str] = []
        self._qd_prev = self.sim.qd.copy()
        self._qdd = np.zeros(6)
        self._elbow_prev: tuple[float, np.ndarray, np.ndarray] | None = None  # (time, position, velocity) published
        self._execution_ms = 0.0

    # --- lifecycle -----------------------------------------------------------------------------------------
    def start(self) -> None:
        self._running.set()
        self._listen(RTDE_PORT, self.rtde.serve)
        self._listen(DASHBOARD_PORT, lambda sock: dashboard.serve(self, sock))
        for port in SCRIPT_PORTS:
            self._listen(port, lambda sock: script_server.serve(sock, self._running, self._script_received))
        self._spawn(self._tick_loop, "ur3-tick")

    def stop(self) -> None:
        self._running.clear()
        for s in self._listeners:
            # shutdown wakes an accept loop waiting in its 0.2 s poll now (Linux: the accept fails at once), so the
            # joins below do not wait out the timeout: 0.2 s of every HIL run's close (issue 28)
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                s.close()
            except OSError:
                pass
        self.rtde.close_all()
        for t in self._threads:
            t.join(timeout=2.0)

    def _spawn(self, target: Callable[..., None], name: str, *args: object) -> None:
        t = threading.Thread(target=target, args=args, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def _listen(self, port: int, handler: Callable[[socket.socket], None]) -> None:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((self.host, port))
        except OSError as exc:
            s.close()
            self.stop()
            raise HardwareError(f"cannot bind {self.host}:{port}: {exc.strerror or exc}") from None
        s.listen(8)
        s.settimeout(0.2)
        self._listeners.append(s)
        self._spawn(self._accept_loop, f"ur3-accept-{port}", s, handler)

    def _accept_loop(self, listener: socket.socket, handler: Callable[[socket.socket], None]) -> None:
        while self._running.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.settimeout(None)
            self._spawn(handler, "ur3-conn", conn)
        self._threads = [t for t in self._threads if t.is_alive()]

    def log(self, message: str) -> None:
        """An event for the emulator's log and for every started RTDE client as a text message."""
        logger.info("%s", message)
        if self._log_sink is not None:
            self._log_sink(message)
        self.rtde.broadcast_text(message)

    # --- program state (the dashboard and the script ports) ------------------------------------------------
    def safety_mode(self) -> int:
        return self.sim.safety_mode

    def program_running(self) -> bool:
        return self.program_state() == "PLAYING"

    def program_state(self) -> str:
        """STOPPED, PLAYING or PAUSED (the dashboard's programState; RTDE runtime_state)."""
        if self.script is None:
            return "STOPPED"
        return "PAUSED" if self.held_by_dashboard or self.script.paused else "PLAYING"

    def resume_program(self) -> bool:
        """The dashboard's ``play``: resumes a program the dashboard paused (the emulator has no other to play)."""
        with self.lock:
            if self.script is None or not self.held_by_dashboard or self.robot_mode != arm_sim.ROBOT_MODE_RUNNING:
                return False
            self.held_by_dashboard = False
        return True

    def pause_program(self) -> bool:
        with self.lock:
            if self.script is None:
                return False
            self.held_by_dashboard = True
            self._stop_arm()
        return True

    def stop_program(self, reason: str) -> None:
        with self.lock:
            if self.script is not None:
                self.script.end(reason)
                self.script = None
                self.held_by_dashboard = False
                self.last_stop_reason = reason
                self._stop_arm()

    def _stop_arm(self) -> None:
        if self.sim.motion is not None or np.any(self.sim.qd):
            self.sim.start(arm_sim.StopMotion(4.0, tool=False))

    def unlock_protective_stop(self) -> tuple[bool, str]:
        with self.lock:
            ok, why = self.sim.unlock()
        if ok:
            self.log("protective stop released")
        return ok, why

    def power(self, on: bool) -> bool:
        """``power on`` brings the arm to IDLE (brakes still on); ``power off`` stops the program first."""
        with self.lock:
            if on:
                if self.robot_mode == ROBOT_MODE_POWER_OFF:
                    self.robot_mode = ROBOT_MODE_IDLE
            else:
                self.stop_program("power off")
                self.sim.motion, self.sim.qd = None, np.zeros(6)
                self.robot_mode = ROBOT_MODE_POWER_OFF
        return True

    def release_brakes(self) -> bool:
        with self.lock:
            if self.robot_mode != ROBOT_MODE_IDLE:
                return False
            self.robot_mode = arm_sim.ROBOT_MODE_RUNNING
        return True

    def restart_safety(self) -> None:
        """``restart safety``: the safety system restarts and the arm is left powered off (UR's client then waits
        for ``Robotmode: POWER_OFF``); a protective stop is cleared by the restart."""
        with self.lock:
            self.power(False)
            self.sim.safety_mode = arm_sim.SAFETY_NORMAL
            self.sim.protective_stop_reason = ""
        self.log("safety system restarted: the robot is powered off")

    def shutdown(self) -> None:
        self.log("shutdown requested on the dashboard: the controller shuts down")
        self.shutdown_requested.set()

    def _script_received(self, text: str) -> None:
        if SCRIPT_MARKER in text:
            self.start_control_script(text)
        else:
            first = text.strip().splitlines()[0] if text.strip() else ""
            self.log(f"script not run (the emulator runs only ur_rtde's control script): {first[:80]}")

    def start_control_script(self, text: str) -> None:
        with self.lock:
            if self.robot_mode != arm_sim.ROBOT_MODE_RUNNING or self.sim.protective_stopped:
                self.log("program not started: the robot is not in RUNNING mode or is protective-stopped")
                return
            if self.script is not None:
                self.script.end("replaced by a new program")
            self.held_by_dashboard = False
            self.script = ControlScript(
                self.sim,
                self.in_int,
                self.in_double,
                self.out_int,
                self.out_double,
                offset=register_offset(text),
                log=self._log_later,
                path=move_path(text),
                text=text,
                controller_version=".".join(map(str, self.version[:3])),
                inputs_other=self.inputs_other,
            )
            self.script.watchdog_last_s = self.sim.time_s
            self.counters["uploads"] += 1
        self.log("RTDE control script started (emulated register protocol)")

    def _log_later(self, message: str) -> None:
        # Called from inside the tick (lock held): text messages are sent after the tick releases the lock.
        self._pending_logs.append(message)

    # --- inputs from RTDE clients --------------------------------------------------------------------------
    def inputs_received(self, values: dict[str, object]) -> bool:
        """One data package's inputs (lock held): registers, I/O, the speed slider, the external F/T sensor.
        True when the state changed in a way clients must see at once (a paused program resumed)."""
        self.counters["data_in"] += 1
        for name, value in values.items():
            if name.startswith("input_int_register_"):
                self.in_int[int(name.rsplit("_", 1)[1])] = int(value)  # type: ignore[call-overload]
            elif name.startswith("input_double_register_"):
                self.in_double[int(name.rsplit("_", 1)[1])] = float(value)  # type: ignore[arg-type]
            else:
                self.inputs_other[name] = value
        io_changed = self._apply_io(values)
        if self.script is not None:
            self.script.input_updated(set(values), self.sim.time_s)
            # ur_rtde's very next call reads the last state it received: show it the resumed program now, not a
            # tick later (see control_script's module docstring, "Refusals").
            return self.script.resume_if_cleared() or io_changed
        return io_changed

    def publish_now(self) -> None:
        """A data package to every started client now, between ticks."""
        with self.lock:
            conns = [c for c in self.rtde.connections.values() if c.started and not c.dead and c.output is not None]
            values = self._output_values() if conns else {}
            packets = [(c, rp.packet(rp.DATA_PACKAGE, c.output.pack(values))) for c in conns if c.output is not None]
            state = self._next_state()
        for conn, data in packets:
            conn.send_data(data, state)

    def _next_state(self) -> int:
        """The build number of the state packages just built (lock held): `RtdeConnection.send_data` drops one
        that reaches a client after a newer one."""
        self._states_built += 1
        return self._states_built

    def _apply_io(self, v: dict[str, object]) -> bool:
        """The RTDE guide's masked outputs: only the bits (outputs) a mask selects change. True when an output or
        the slider changed (published at once: a client reads its outputs back a few ms after setting them)."""
        before = (self.digital_out_bits, tuple(self.analog_out_ratio), tuple(self.analog_out_voltage))
        slider = self.sim.speed_fraction
        for mask_name, value_name, shift in (
            ("standard_digital_output_mask", "standard_digital_output", 0),
            ("configurable_digital_output_mask", "configurable_digital_output", 8),
            ("tool_digital_output_mask", "tool_digital_output", 16),
        ):
            if mask_name in v:
                mask = int(v[mask_name]) << shift  # type: ignore[call-overload]
                bits = int(v.get(value_name, 0)) << shift  # type: ignore[call-overload]
                self.digital_out_bits = (self.digital_out_bits & ~mask) | (bits & mask)
        if "standard_analog_output_mask" in v:
            mask = int(v["standard_analog_output_mask"])  # type: ignore[call-overload]
            kinds = int(v.get("standard_analog_output_type", 0))  # type: ignore[call-overload]
            for k in (0, 1):
                if mask & (1 << k):
                    ratio = float(v.get(f"standard_analog_output_{k}", 0.0))  # type: ignore[arg-type]
                    self.analog_out_ratio[k] = min(max(ratio, 0.0), 1.0)
                    self.analog_out_voltage[k] = bool(kinds & (1 << k))
        if int(v.get("speed_slider_mask", 0)) == 1:  # type: ignore[call-overload]
            fraction = float(v.get("speed_slider_fraction", 1.0))  # type: ignore[arg-type]
            self.sim.speed_fraction = min(max(fraction, 0.0), 1.0)
        if "external_force_torque" in v and self.sim.external_wrench is not None:
            self.sim.external_wrench = np.asarray(v["external_force_torque"], dtype=float)
        after = (self.digital_out_bits, tuple(self.analog_out_ratio), tuple(self.analog_out_voltage))
        return after != before or self.sim.speed_fraction != slider

    # --- the controller tick -------------------------------------------------------------------------------
    def _tick_loop(self) -> None:
        next_t = time.perf_counter()
        while self._running.is_set():
            next_t += self.dt
            started = time.perf_counter()
            sends, state = self._tick()
            for conn, data in sends:
                if conn.send_data(data, state):
                    self.counters["data_out"] += 1
            pending, self._pending_logs = self._pending_logs, []
            for message in pending:
                self.log(message)
            self._execution_ms = (time.perf_counter() - started) * 1e3
            delay = next_t - time.perf_counter()
            if delay < -self.dt:
                self.counters["late_ticks"] += 1
                next_t = time.perf_counter()
            # Always sleep a little, even when late: at --rt-priority (SCHED_FIFO) a loop that runs its ticks back to
            # back never lets anything of its own or lower priority run. On a loaded PC two such emulators held both
            # cores: a CAN run at the same priority and the kernel's normal-priority pty worker stalled 0.3-1.5 s,
            # and the joint modules' watchdog stopped the run. A controller that cannot keep up runs late (counted
            # in late_ticks); it does not take the machine.
            time.sleep(max(delay, MIN_IDLE_FRACTION * self.dt))

    def _tick(self) -> tuple[list[tuple[RtdeConnection, bytes]], int]:
        """One controller period; the state packages due, and their build number (`_next_state`)."""
        with self.lock:
            # As on the controller: the program reads this period's inputs and sets the motion, then the motion
            # advances one period, then the outputs are published.
            script = self.script
            if script is not None and not self.held_by_dashboard:
                script.tick(self.sim.time_s + self.dt)
                script.contact_tick()
                if not script.running:
                    self.last_stop_reason = script.stop_reason
                    self.script = None
            self.sim.tick(self.dt)
            self._derivatives()
            if self.sim.protective_stopped and not self._was_pstopped:
                self.counters["protective_stops"] += 1
                self._pending_logs.append(f"PROTECTIVE STOP: {self.sim.protective_stop_reason}")
            self._was_pstopped = self.sim.protective_stopped
            if self.script is not None and self.sim.protective_stopped:
                # A protective stop halts the program in the same period (the published state never shows a
                # protective stop with the program still playing).
                self.script.end("protective stop")
                self.last_stop_reason = "protective stop"
                self.script = None
            self._tick_count += 1
            self.counters["ticks"] = self._tick_count
            due = self.rtde.due(self._tick_count)
            if not due:
                return [], 0
            values = self._output_values()
            packets = [(c, rp.packet(rp.DATA_PACKAGE, c.output.pack(values))) for c in due if c.output is not None]
            return packets, self._next_state()

    def _derivatives(self) -> None:
        self._qdd = (self.sim.qd - self._qd_prev) / self.dt
        self._qd_prev = self.sim.qd

    def _elbow(self) -> tuple[np.ndarray, np.ndarray]:
        """The elbow's position and its velocity since the last published package."""
        now, elbow = self.sim.time_s, self.sim.elbow_position()
        prev = self._elbow_prev
        if prev is not None and now <= prev[0]:
            return prev[1], prev[2]  # a package between ticks (publish_now): the same instant
        speed = (elbow - prev[1]) / (now - prev[0]) if prev is not None else np.zeros(3)
        self._elbow_prev = (now, elbow, speed)
        return elbow, speed

    def _output_values(self) -> dict[str, object]:
        """Every output field's current value (called with the lock held)."""
        sim = self.sim
        q = sim.q.tolist()
        qd = sim.qd.tolist()
        pose = sim.tcp_pose()
        speed = sim.tcp_speed().tolist()
        state = self.program_state()
        pstop = sim.protective_stopped
        wrench = sim.wrench
        tool_rotation = sim.tcp_rotation()
        elbow, elbow_speed = self._elbow()
        values: dict[str, object] = {
            "timestamp": sim.time_s,
            "target_q": q,  # no tracking error model: the target is where the arm is
            "target_qd": qd,
            "target_qdd": self._qdd.tolist(),
            "actual_q": q,
            "actual_qd": qd,
            "actual_qdd": self._qdd.tolist(),
            "actual_TCP_pose": pose.tolist(),
            "actual_TCP_speed": speed,
            "target_TCP_pose": pose.tolist(),
            "target_TCP_speed": speed,
            "actual_TCP_force": wrench.tolist(),
            "ft_raw_wrench": (sim.wrench_raw if sim.external_wrench is None else sim.external_wrench).tolist(),
            "tcp_force_scalar": float(np.linalg.norm(wrench[:3])),
            "robot_mode": self.robot_mode,
            "joint_mode": [JOINT_RUNNING_MODE] * 6,
            "safety_mode": sim.safety_mode,
            "safety_status": sim.safety_mode,
            "runtime_state": {"PLAYING": RUNTIME_PLAYING, "PAUSED": RUNTIME_PAUSED}.get(state, RUNTIME_STOPPED),
            # robot status bits: 0 power on, 1 program running; safety status bits: 0 normal, 2 protective stop.
            "robot_status_bits": int(self.robot_mode != ROBOT_MODE_POWER_OFF) | (2 if state == "PLAYING" else 0),
            "safety_status_bits": (4 if pstop else 1),
            "speed_scaling": sim.speed_fraction,
            "target_speed_fraction": sim.speed_fraction,
            "actual_digital_output_bits": self.digital_out_bits,
            "actual_digital_input_bits": 0,  # nothing is wired to the emulated arm's inputs
            "standard_analog_output0": self._analog_out(0),
            "standard_analog_output1": self._analog_out(1),
            "analog_io_types": (4 if self.analog_out_voltage[0] else 0) | (8 if self.analog_out_voltage[1] else 0),
            "actual_tool_accelerometer": (tool_rotation.T @ np.array([0.0, 0.0, 9.81])).tolist(),
            "elbow_position": elbow.tolist(),
            "elbow_velocity": elbow_speed.tolist(),
            "payload": sim.payload_mass_kg,
            "payload_cog": sim.payload_cog_m.tolist(),
            "actual_execution_time": self._execution_ms,
        }
        for name in UNMODELLED:
            kind = rp.OUTPUT_TYPES[name]
            values[name] = [math.nan] * 6 if kind == "VECTOR6D" else math.nan
        for name in ("input_bit_registers0_to_31", "input_bit_registers32_to_63"):
            values[name] = self.inputs_other.get(name, 0)
        for names, registers in (
            (_OUTPUT_INT_REGISTERS, self.out_int),
            (_OUTPUT_DOUBLE_REGISTERS, self.out_double),
            (_INPUT_INT_REGISTERS, self.in_int),
            (_INPUT_DOUBLE_REGISTERS, self.in_double),
        ):
            values.update(zip(names, registers, strict=True))
        return _DefaultValues(values)

    def _analog_out(self, k: int) -> float:
        lo, hi = ANALOG_VOLTAGE_V if self.analog_out_voltage[k] else ANALOG_CURRENT_A
        return lo + self.analog_out_ratio[k] * (hi - lo)

    def summary(self) -> dict[str, object]:
        with self.lock:
            refusals = self.script.refusals if self.script is not None else 0
            return dict(
                self.counters,
                rt_priority=self.rt_priority,
                refusals_current_program=refusals,
                protective_stop_reason=self.sim.protective_stop_reason,
            )


# the register fields' names, formatted once (every published package names all 192)
_OUTPUT_INT_REGISTERS = tuple(f"output_int_register_{i}" for i in range(48))
_OUTPUT_DOUBLE_REGISTERS = tuple(f"output_double_register_{i}" for i in range(48))
_INPUT_INT_REGISTERS = tuple(f"input_int_register_{i}" for i in range(48))
_INPUT_DOUBLE_REGISTERS = tuple(f"input_double_register_{i}" for i in range(48))


class _DefaultValues(dict):
    """Output values for every field: what the emulator does not model is NaN (doubles) or 0 (integers)."""

    def __missing__(self, name: str) -> object:
        kind = rp.OUTPUT_TYPES.get(name, "DOUBLE")
        if kind == "VECTOR3D":
            return [math.nan] * 3
        if kind.startswith("VECTOR6"):
            return [0] * 6 if "INT" in kind else [math.nan] * 6
        return math.nan if kind == "DOUBLE" else 0
