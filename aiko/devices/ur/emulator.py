"""A UR3 controller on a loopback address: RTDE (30004), the dashboard (29999) and the script ports (30001-30003).

Enough of a UR controller for the unmodified ``ur_rtde`` client (``rtde_control``, ``rtde_receive``) to connect,
read state and move the simulated arm (:mod:`aiko.devices.ur.arm_sim`):

* RTDE: protocol versions 1 and 2, controller version, output and input recipes (``NOT_FOUND`` for a field the
  emulator does not know, ``IN_USE`` for an input another connection holds), start / pause, data packages at
  each client's requested frequency (``rate_hz / round(rate_hz / frequency)``), text messages for events;
* the script ports accept URScript. The emulator does not run URScript: an upload of ur_rtde's control script
  (``def rtde_control():``) starts :class:`~aiko.devices.ur.control_script.ControlScript`, which executes the
  script's register protocol; any other script is reported as not run (a text message and the log);
* the dashboard: :mod:`aiko.devices.ur.dashboard`.

The real controller's state streams on 30001-30003 (primary / secondary / real-time packages) are not sent: the
ur_rtde client does not read them.

Threads, not asyncio: one accept thread per port, one thread per connection, one controller tick thread. The
tick thread holds the state lock for the step and packs every due data package; sockets are written outside
the lock. The plant hook (:data:`aiko.devices.ur.arm_sim.PlantHook`) runs inside the tick.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from aiko.core.errors import HardwareError
from aiko.devices.ur import arm_sim, dashboard
from aiko.devices.ur import kinematics as kin
from aiko.devices.ur import rtde_protocol as rp
from aiko.devices.ur.control_script import SCRIPT_MARKER, ControlScript, move_path, register_offset

RTDE_PORT = 30004
DASHBOARD_PORT = 29999
SCRIPT_PORTS = (30001, 30002, 30003)

# runtime_state values (RTDE guide): STOPPING 0, STOPPED 1, PLAYING 2, PAUSING 3, PAUSED 4, RESUMING 5.
RUNTIME_STOPPED = 1
RUNTIME_PLAYING = 2
JOINT_RUNNING_MODE = 253

CONTROLLER_VERSIONS = {
    # model -> (RTDE controller version, dashboard "PolyScopeVersion" reply)
    "ur3": ((3, 15, 8, 106339), "URSoftware 3.15.8.106339 (Jul 17 2023)"),
    "ur3e": ((5, 11, 1, 108318), "URSoftware 5.11.1.108318 (Nov 16 2021)"),
}


@dataclass
class _RtdeConnection:
    sock: socket.socket
    conn_id: int
    protocol_version: int = 1
    output: rp.Recipe | None = None
    output_divisor: int = 1
    inputs: dict[int, rp.Recipe] = field(default_factory=dict)
    started: bool = False
    send_lock: threading.Lock = field(default_factory=threading.Lock)

    def send(self, data: bytes, only_if_started: bool = False) -> bool:
        """Write one packet; ``only_if_started`` drops it when a pause was answered since it was packed (a data
        package must not follow the pause reply)."""
        with self.send_lock:
            if only_if_started and not self.started:
                return False
            try:
                self.sock.sendall(data)
                return True
            except OSError:
                return False


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
        self.version, self.polyscope_version = CONTROLLER_VERSIONS[model]
        self.model_name = kin.MODELS[model].name
        self.serial_number = "20180300000"
        self.robot_mode = arm_sim.ROBOT_MODE_RUNNING
        self.loaded_program = ""
        self.lock = threading.RLock()
        self.in_int = [0] * 48
        self.in_double = [0.0] * 48
        self.out_int = [0] * 48
        self.out_double = [0.0] * 48
        self.inputs_other: dict[str, object] = {}
        self.script: ControlScript | None = None
        self.last_stop_reason = ""
        self._input_owner: dict[str, int] = {}
        self._rtde: dict[int, _RtdeConnection] = {}
        self._next_conn = 1
        self._listeners: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._running = threading.Event()
        self._tick_count = 0
        self._log_sink = log
        self.counters = {"ticks": 0, "late_ticks": 0, "data_out": 0, "data_in": 0, "uploads": 0, "protective_stops": 0}
        self._was_pstopped = False
        self._pending_logs: list[str] = []

    # --- lifecycle -----------------------------------------------------------------------------------------
    def start(self) -> None:
        self._running.set()
        self._listen(RTDE_PORT, self._serve_rtde)
        self._listen(DASHBOARD_PORT, self._serve_dashboard)
        for port in SCRIPT_PORTS:
            self._listen(port, self._serve_script)
        self._spawn(self._tick_loop, "ur3-tick")

    def stop(self) -> None:
        self._running.clear()
        for s in self._listeners:
            try:
                s.close()
            except OSError:
                pass
        with self.lock:
            conns = list(self._rtde.values())
        for c in conns:
            try:
                c.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
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

    def log(self, message: str) -> None:
        """An event for the emulator's log and for every started RTDE client as a text message."""
        if self._log_sink is not None:
            self._log_sink(message)
        with self.lock:
            conns = [c for c in self._rtde.values() if c.started and c.protocol_version >= 2]
        for c in conns:
            c.send(rp.text_message(message), only_if_started=True)

    # --- program state (used by the dashboard and the script ports) -----------------------------------------
    def safety_mode(self) -> int:
        return self.sim.safety_mode

    def program_running(self) -> bool:
        return self.script is not None and self.script.running

    def play(self) -> bool:
        """The dashboard's ``play``: only ur_rtde's control script can run here, so play re-runs the last upload."""
        return self.program_running()

    def stop_program(self, reason: str) -> None:
        with self.lock:
            if self.script is not None:
                self.script.end(reason)
                self.script = None
                self.last_stop_reason = reason
                if self.sim.motion is not None:
                    self.sim.start(arm_sim.StopMotion(4.0, tool=False))

    def unlock_protective_stop(self) -> tuple[bool, str]:
        with self.lock:
            ok, why = self.sim.unlock()
        if ok:
            self.log("protective stop released")
        return ok, why

    def start_control_script(self, text: str) -> None:
        with self.lock:
            if self.robot_mode != arm_sim.ROBOT_MODE_RUNNING or self.sim.protective_stopped:
                self.log("program not started: the robot is not in RUNNING mode or is protective-stopped")
                return
            if self.script is not None:
                self.script.end("replaced by a new program")
            self.script = ControlScript(
                self.sim,
                self.in_int,
                self.in_double,
                self.out_int,
                self.out_double,
                offset=register_offset(text),
                log=self._log_later,
                path=move_path(text),
            )
            self.script.watchdog_last_s = self.sim.time_s
            self.counters["uploads"] += 1
        self.log("RTDE control script started (emulated register protocol)")

    def _log_later(self, message: str) -> None:
        # Called from inside the tick (lock held): text messages are sent after the tick releases the lock.
        self._pending_logs.append(message)

    # --- the controller tick -------------------------------------------------------------------------------
    def _tick_loop(self) -> None:
        next_t = time.perf_counter()
        while self._running.is_set():
            next_t += self.dt
            sends = self._tick()
            for conn, data in sends:
                if conn.send(data, only_if_started=True):
                    self.counters["data_out"] += 1
            pending, self._pending_logs = self._pending_logs, []
            for message in pending:
                self.log(message)
            delay = next_t - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            elif delay < -self.dt:
                self.counters["late_ticks"] += 1
                next_t = time.perf_counter()

    def _tick(self) -> list[tuple[_RtdeConnection, bytes]]:
        with self.lock:
            # As on the controller: the program reads this period's inputs and sets the motion, then the motion
            # advances one period, then the outputs are published.
            if self.script is not None:
                self.script.tick(self.sim.time_s + self.dt)
                if not self.script.running:
                    self.last_stop_reason = self.script.stop_reason
                    self.script = None
            self.sim.tick(self.dt)
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
            due = [
                c
                for c in self._rtde.values()
                if c.started and c.output is not None and self._tick_count % c.output_divisor == 0
            ]
            if not due:
                return []
            values = self._output_values()
            return [(c, rp.packet(rp.DATA_PACKAGE, c.output.pack(values))) for c in due if c.output is not None]

    def _output_values(self) -> dict[str, object]:
        """Every output field's current value (called with the lock held)."""
        sim = self.sim
        q = sim.q.tolist()
        qd = sim.qd.tolist()
        pose = sim.tcp_pose().tolist()
        speed = sim.tcp_speed().tolist()
        running = self.program_running()
        pstop = sim.protective_stopped
        values: dict[str, object] = {
            "timestamp": sim.time_s,
            "target_q": q,
            "target_qd": qd,
            "actual_q": q,
            "actual_qd": qd,
            "actual_TCP_pose": pose,
            "actual_TCP_speed": speed,
            "target_TCP_pose": pose,
            "target_TCP_speed": speed,
            "actual_TCP_force": sim.wrench.tolist(),
            "ft_raw_wrench": sim.wrench.tolist(),
            "robot_mode": self.robot_mode,
            "joint_mode": [JOINT_RUNNING_MODE] * 6,
            "safety_mode": sim.safety_mode,
            "safety_status": sim.safety_mode,
            "runtime_state": RUNTIME_PLAYING if running else RUNTIME_STOPPED,
            # robot status bits: 0 power on, 1 program running; safety status bits: 0 normal, 2 protective stop.
            "robot_status_bits": (1 if self.robot_mode != 3 else 0) | (2 if running else 0),
            "safety_status_bits": (4 if pstop else 1),
            "speed_scaling": 1.0,
            "target_speed_fraction": 1.0,
            "actual_main_voltage": 48.0,
            "actual_robot_voltage": 48.0,
            "joint_temperatures": [30.0] * 6,
            "actual_joint_voltage": [48.0] * 6,
            "actual_tool_accelerometer": [0.0, 0.0, 9.81],
            "tcp_force_scalar": float(np.linalg.norm(sim.wrench[:3])),
            "actual_execution_time": 0.2,
        }
        for i in range(48):
            values[f"output_int_register_{i}"] = self.out_int[i]
            values[f"output_double_register_{i}"] = self.out_double[i]
            values[f"input_int_register_{i}"] = self.in_int[i]
            values[f"input_double_register_{i}"] = self.in_double[i]
        return _DefaultValues(values)

    # --- RTDE ----------------------------------------------------------------------------------------------
    def _serve_rtde(self, sock: socket.socket) -> None:
        with self.lock:
            conn = _RtdeConnection(sock, self._next_conn)
            self._next_conn += 1
            self._rtde[conn.conn_id] = conn
        buffer = bytearray()
        try:
            while self._running.is_set():
                chunk = sock.recv(65536)
                if not chunk:
                    break
                buffer.extend(chunk)
                for kind, payload in rp.split_packets(buffer):
                    self._rtde_packet(conn, kind, payload)
        except (OSError, rp.ProtocolError):
            pass
        finally:
            with self.lock:
                self._rtde.pop(conn.conn_id, None)
                for name in [n for n, owner in self._input_owner.items() if owner == conn.conn_id]:
                    del self._input_owner[name]
            sock.close()

    def _rtde_packet(self, conn: _RtdeConnection, kind: int, payload: bytes) -> None:
        if kind == rp.DATA_PACKAGE:
            self._data_in(conn, payload)
        elif kind == rp.REQUEST_PROTOCOL_VERSION:
            version = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else 0
            ok = version in (1, 2)
            if ok:
                conn.protocol_version = version
            conn.send(rp.accepted_reply(kind, ok))
        elif kind == rp.GET_URCONTROL_VERSION:
            conn.send(rp.controller_version_reply(*self.version))
        elif kind == rp.CONTROL_PACKAGE_SETUP_OUTPUTS:
            frequency, names = rp.parse_setup_outputs(payload, conn.protocol_version)
            types = tuple(rp.OUTPUT_TYPES.get(n, "NOT_FOUND") for n in names)
            recipe = rp.Recipe(1, tuple(names), types)
            if recipe.valid and frequency > 0:
                conn.output = recipe
                conn.output_divisor = max(1, round(self.rate_hz / min(frequency, self.rate_hz)))
            conn.send(rp.setup_reply(kind, 1 if recipe.valid else 0, types))
        elif kind == rp.CONTROL_PACKAGE_SETUP_INPUTS:
            names = rp.parse_setup_inputs(payload)
            with self.lock:
                types = []
                for n in names:
                    owner = self._input_owner.get(n)
                    if n not in rp.INPUT_TYPES:
                        types.append("NOT_FOUND")
                    elif owner is not None and owner != conn.conn_id:
                        types.append("IN_USE")
                    else:
                        types.append(rp.INPUT_TYPES[n])
                recipe_id = len(conn.inputs) + 1
                recipe = rp.Recipe(recipe_id, tuple(names), tuple(types))
                if recipe.valid:
                    conn.inputs[recipe_id] = recipe
                    for n in names:
                        self._input_owner[n] = conn.conn_id
                else:
                    recipe_id = 0
            conn.send(rp.setup_reply(kind, recipe_id, types))
        elif kind == rp.CONTROL_PACKAGE_START:
            ok = conn.output is not None or bool(conn.inputs)
            with conn.send_lock:
                try:
                    conn.sock.sendall(rp.accepted_reply(kind, ok))
                except OSError:
                    return
                conn.started = ok
        elif kind == rp.CONTROL_PACKAGE_PAUSE:
            with conn.send_lock:
                conn.started = False
                try:
                    conn.sock.sendall(rp.accepted_reply(kind, True))
                except OSError:
                    return
        else:
            conn.send(rp.text_message(f"unknown RTDE package type {kind}", level=rp.MESSAGE_ERROR))

    def _data_in(self, conn: _RtdeConnection, payload: bytes) -> None:
        if not payload:
            return
        recipe = conn.inputs.get(payload[0])
        if recipe is None:
            return
        values = recipe.unpack(payload)
        with self.lock:
            self.counters["data_in"] += 1
            for name, value in values.items():
                if name.startswith("input_int_register_"):
                    self.in_int[int(name.rsplit("_", 1)[1])] = int(value)  # type: ignore[arg-type]
                elif name.startswith("input_double_register_"):
                    self.in_double[int(name.rsplit("_", 1)[1])] = float(value)  # type: ignore[arg-type]
                else:
                    self.inputs_other[name] = value
            if self.script is not None:
                self.script.input_updated(set(values), self.sim.time_s)

    # --- dashboard -----------------------------------------------------------------------------------------
    def _serve_dashboard(self, sock: socket.socket) -> None:
        f = sock.makefile("rwb", buffering=0)
        try:
            sock.sendall((dashboard.WELCOME + "\n").encode())
            for raw in f:
                reply, close = dashboard.answer(self, raw.decode(errors="replace"))
                sock.sendall((reply + "\n").encode())
                if close:
                    break
        except OSError:
            pass
        finally:
            sock.close()

    # --- script ports --------------------------------------------------------------------------------------
    def _serve_script(self, sock: socket.socket) -> None:
        buffer = bytearray()
        sock.settimeout(0.05)
        try:
            while self._running.is_set():
                try:
                    chunk = sock.recv(65536)
                except TimeoutError:
                    if buffer:
                        self._script_received(buffer.decode(errors="replace"))
                        buffer.clear()
                    continue
                if not chunk:
                    break
                buffer.extend(chunk)
            if buffer:
                self._script_received(buffer.decode(errors="replace"))
        except OSError:
            pass
        finally:
            sock.close()

    def _script_received(self, text: str) -> None:
        if SCRIPT_MARKER in text:
            self.start_control_script(text)
        else:
            first = text.strip().splitlines()[0] if text.strip() else ""
            self.log(f"script not run (the emulator runs only ur_rtde's control script): {first[:80]}")

    def summary(self) -> dict[str, object]:
        with self.lock:
            return dict(self.counters, protective_stop_reason=self.sim.protective_stop_reason)


class _DefaultValues(dict):
    """Output values with a zero of the right shape for every field the emulator does not model."""

    def __missing__(self, name: str) -> object:
        kind = rp.OUTPUT_TYPES.get(name, "DOUBLE")
        if kind == "VECTOR3D":
            return [0.0] * 3
        if kind.startswith("VECTOR6"):
            return [0] * 6 if "INT" in kind else [0.0] * 6
        return 0.0 if kind == "DOUBLE" else 0


def run(
    host: str,
    rate_hz: float,
    duration_s: float | None,
    model: str = "ur3",
    safety: arm_sim.SafetyConfig | None = None,
    plant: arm_sim.PlantHook | None = None,
) -> dict[str, object]:
    """Run until ``duration_s`` passes (None: until interrupted / SIGTERM); returns the closing counters."""
    import signal

    emulator = UR3Emulator(
        host, rate_hz, model, safety, plant, log=lambda m: print(json.dumps({"event": m}), flush=True)
    )
    emulator.start()
    done = threading.Event()

    def _term(*_a: object) -> None:
        done.set()

    previous = signal.signal(signal.SIGTERM, _term)
    print(
        f"ur3: {host} rtde {RTDE_PORT} dashboard {DASHBOARD_PORT} script "
        f"{SCRIPT_PORTS[0]}-{SCRIPT_PORTS[-1]} at {rate_hz:g} Hz",
        flush=True,
    )
    try:
        done.wait(timeout=duration_s)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        emulator.stop()
    return emulator.summary()
