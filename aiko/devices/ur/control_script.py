"""The register protocol of ur_rtde's control script, executed in Python instead of URScript.

``RTDEControlInterface`` uploads ``rtde_control.script`` (ur_rtde, ``scripts/rtde_control.script``) to the
controller's script port and then drives it through RTDE registers. The emulator does not interpret URScript:
it recognises that upload and runs this class, which follows the script's main loop tick by tick:

* input_int_register_0 (+ the register offset, 0 or 24) holds the command; input_int_register_1 holds the
  ``async`` flag (moves, stops) or an integer argument; input_double_register_0..17 hold the arguments;
* output_int_register_0 is the handshake: 1 "ready for a command", 2 "done with the command"; the client
  waits for 1 before writing a command and for 2 after a blocking one, then writes command 0 ("clear"),
  to which the script answers 1 again;
* real-time commands (servoJ 11, servoL 24, speedJ 9, speedL 10, force mode 6, ...) are processed on every
  tick while they stay in the register and keep the handshake at 1;
* output_int_register_1 and output_double_register_0..5 carry results (IK, FK, TCP offset, checks);
  output_int_register_2 the async progress word (``write_async_progress_register`` in the script: operation
  id in bits 24-30, write counter in bits 16-23, bit 15 "running", bits 0-14 progress);
* command 35 arms RTDE's watchdog on input_int_register_0 (``rtde_set_watchdog(..., "stop")``): every data
  package that carries that register counts as an update (ur_rtde's ``kickWatchdog`` sends one with command 0),
  and no update for longer than 1 / frequency stops the program;
* command 255 ends the script (ur_rtde's ``stopScript``).

Command numbers: ``RTDE::RobotCommand::Type`` in ur_rtde's ``include/ur_rtde/rtde.h``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from aiko.devices.ur import arm_sim
from aiko.devices.ur import kinematics as kin

READY_FOR_CMD = 1
DONE_WITH_CMD = 2

NO_CMD = 0
MOVEJ, MOVEJ_IK, MOVEL, MOVEL_FK = 1, 2, 3, 4
SPEEDJ, SPEEDL, SERVOJ = 9, 10, 11
SPEED_STOP, SERVO_STOP = 15, 16
SERVOL = 24
SET_TCP, GET_INVERSE_KINEMATICS_ARGS, PROTECTIVE_STOP = 29, 30, 31
STOPL, STOPJ, SET_WATCHDOG = 33, 34, 35
IS_POSE_WITHIN_SAFETY_LIMITS, IS_JOINTS_WITHIN_SAFETY_LIMITS = 36, 37
GET_TCP_OFFSET = 40
GET_FORWARD_KINEMATICS_DEFAULT, GET_FORWARD_KINEMATICS_ARGS = 43, 44
GET_INVERSE_KINEMATICS_DEFAULT, IS_STEADY = 46, 47
GET_ACTUAL_TOOL_FLANGE_POSE = 58
GET_INVERSE_KINEMATICS_HAS_SOLUTION_DEFAULT, GET_INVERSE_KINEMATICS_HAS_SOLUTION_ARGS = 60, 61
MOVE_PATH = 45
WATCHDOG = 99
STOP_SCRIPT = 255

# The script's main loop treats these as real-time: processed every tick, the handshake stays "ready"
# (ur_rtde 1.6.5's script: 24, 11, 9, 10, 6, 25, 26, 27, 38, 58, 66..71).
REALTIME = frozenset({24, 11, 9, 10, 6, 25, 26, 27, 38, 58, 66, 67, 68, 69, 70, 71})

SCRIPT_MARKER = "def rtde_control():"

# Commands that change nothing a client of the emulated arm can observe (payload, gravity, force-mode tuning, F/T
# zeroing): acknowledged as done. Every other command the emulator does not implement stops the program.
NO_EFFECT = frozenset({8, 17, 20, 21, 59, 65})


class PathMotion(arm_sim.Motion):
    """The waypoints of an injected move path one after another (blend radii are ignored: each stops)."""

    def __init__(self, sim: arm_sim.ArmSim, path: list, on_waypoint: Callable[[int], None]) -> None:
        self.path = path
        self.index = -1
        self.current: arm_sim.Motion | None = None
        self.on_waypoint = on_waypoint

    def _next(self, sim: arm_sim.ArmSim) -> None:
        self.index += 1
        if self.index >= len(self.path):
            self.current = None
            self.done = True
            return
        self.on_waypoint(self.index)
        kind, is_pose, values, accel, speed = self.path[self.index]
        if kind == "movej":
            q = sim.ik(values) if is_pose else values
            self.current = arm_sim.MoveJMotion(sim.q, q, speed, accel)
        else:
            pose = values if is_pose else sim.tcp_pose(values)
            self.current = arm_sim.MoveLMotion(sim, pose, speed, accel)

    def step(self, sim: arm_sim.ArmSim, dt: float) -> np.ndarray:
        if self.current is None:
            self._next(sim)
        if self.current is None:
            return sim.q.copy()
        q = self.current.step(sim, dt)
        if self.current.done:
            self.current = None
            if self.index + 1 >= len(self.path):
                self.done = True
        return q


def register_offset(script: str) -> int:
    """The int register offset ur_rtde injected into its script (0, or 24 with FLAG_UPPER_RANGE_REGISTERS)."""
    # ScriptClient inserts the value right after the marker line "global reg_offset_int = # int register offset\n"
    m = re.search(r"reg_offset_int\s*=\s*(?:#[^\n]*\n\s*)?(\d+)", script)
    return int(m.group(1)) if m else 0


_PATH_ENTRY = re.compile(
    r"\b(movel|movej|movep)\((p?)\[([^\]]*)\]\s*,\s*a=([-+0-9.eE]+)\s*,\s*v=([-+0-9.eE]+)\s*,\s*r=([-+0-9.eE]+)\)"
)


def move_path(script: str) -> list[tuple[str, bool, np.ndarray, float, float]]:
    """The path ur_rtde's ``moveL(path)`` / ``moveJ(path)`` / ``movePath`` injected after "# inject move path":
    (move kind, target is a pose, the six values, acceleration, speed) per waypoint (``PathEntry::toScriptCode``)."""
    start = script.find("# inject move path")
    if start < 0:
        return []
    body = script[start : script.find("\n    end", start) if "\n    end" in script[start:] else len(script)]
    out = []
    for kind, is_pose, values, a, v, _r in _PATH_ENTRY.findall(body):
        out.append((kind, is_pose == "p", np.array([float(x) for x in values.split(",")]), float(a), float(v)))
    return out


class ControlScript:
    """One running instance of the control script (created on upload, dropped when the program stops)."""

    def __init__(
        self,
        sim: arm_sim.ArmSim,
        in_int: list[int],
        in_double: list[float],
        out_int: list[int],
        out_double: list[float],
        offset: int = 0,
        log: Callable[[str], None] = lambda _msg: None,
        path: list[tuple[str, bool, np.ndarray, float, float]] | None = None,
    ) -> None:
        self.sim = sim
        self.in_int, self.in_double = in_int, in_double
        self.out_int, self.out_double = out_int, out_double
        self.offset = offset
        self.log = log
        self.path = path or []
        self.running = True
        self.stop_reason = ""
        self.executing = False
        self.blocking: arm_sim.Motion | None = None
        self.async_motion: arm_sim.Motion | None = None
        self.async_wr_count = 0
        self.async_op_id = 0
        self.watchdog_period_s = 0.0
        self.watchdog_last_s = 0.0
        self.unsupported: set[int] = set()
        self._servo_cache: tuple[bytes, np.ndarray] | None = None
        self._write_async(-1)
        self._out_int(0, READY_FOR_CMD)

    # --- registers -----------------------------------------------------------------------------------------
    def _i(self, index: int) -> int:
        return int(self.in_int[self.offset + index])

    def _d(self, index: int) -> float:
        return float(self.in_double[self.offset + index])

    def _vec(self, index: int) -> np.ndarray:
        return np.array([self._d(index + k) for k in range(6)])

    def _out_int(self, index: int, value: int) -> None:
        self.out_int[self.offset + index] = int(value)

    def _out_vec(self, values: np.ndarray) -> None:
        for k in range(6):
            self.out_double[self.offset + k] = float(values[k])

    def _write_async(self, value: int) -> None:
        """``write_async_progress_register`` of the script (see the module docstring for the bit layout)."""
        self.async_wr_count = (self.async_wr_count + 1) % 128
        if value == 0:
            self.async_op_id = (self.async_op_id + 1) % 128
        word = self.async_wr_count * 65536 + self.async_op_id * 16777216
        if value >= 0:
            word += min(value, 32767) + 32768
        self._out_int(2, word)

    # --- the watchdog --------------------------------------------------------------------------------------
    def input_updated(self, names: set[str], now_s: float) -> None:
        """A data package arrived carrying ``names``: feeds the watchdog on input_int_register_<offset>."""
        if f"input_int_register_{self.offset}" in names:
            self.watchdog_last_s = now_s

    def end(self, reason: str) -> None:
        self.running = False
        self.stop_reason = reason
        self.blocking = None
        self.async_motion = None

    # --- the main loop, one tick ---------------------------------------------------------------------------
    def tick(self, now_s: float) -> None:
        """One pass of the script's ``while keep_running`` loop (the controller calls it once per period)."""
        if not self.running:
            return
        if self.watchdog_period_s > 0 and now_s - self.watchdog_last_s > self.watchdog_period_s:
            self.log("RTDE input watchdog: no update of the command register, program stopped")
            self.sim.start(arm_sim.StopMotion(4.0, tool=False))
            self.end("watchdog")
            return
        if self.sim.protective_stopped:
            # A protective stop halts the program on a real controller; ur_rtde re-uploads after the unlock.
            self.end("protective stop")
            return
        if self.async_motion is not None and self.sim.motion is not self.async_motion:
            self.async_motion = None
            self._write_async(-1)
        if self.blocking is not None:
            if self.sim.motion is self.blocking:
                return  # a synchronous move is running: the script is inside movej / movel
            self.blocking = None
            self._out_int(0, DONE_WITH_CMD)
            return
        cmd = self._i(0)
        if cmd in REALTIME:
            self.process(cmd)
            self._out_int(0, READY_FOR_CMD)
        elif cmd == NO_CMD or cmd == WATCHDOG:
            self.executing = False
            self._out_int(0, READY_FOR_CMD)
        elif not self.executing:
            self.executing = True
            self.process(cmd)
            if cmd == STOP_SCRIPT:
                self.end("stopScript")
            elif self.blocking is None:
                self._out_int(0, DONE_WITH_CMD)

    # --- the commands --------------------------------------------------------------------------------------
    def _move(self, motion: arm_sim.Motion) -> None:
        if self.async_motion is not None:
            self._write_async(-1)
            self.async_motion = None
        self.sim.start(motion)
        if self._i(1) == 1:
            self.async_motion = motion
            self._write_async(0)
        else:
            self.blocking = motion

    def process(self, cmd: int) -> None:
        sim = self.sim
        try:
            self._process(cmd, sim)
        except kin.IKError as exc:
            # get_inverse_kin failing is a runtime error that ends the script on the controller.
            self.log(f"command {cmd}: {exc}")
            self.end("inverse kinematics failed")

    def _process(self, cmd: int, sim: arm_sim.ArmSim) -> None:
        if cmd == MOVEJ:
            self._move(arm_sim.MoveJMotion(sim.q, self._vec(0), self._d(6), self._d(7)))
        elif cmd == MOVEJ_IK:
            self._move(arm_sim.MoveJMotion(sim.q, sim.ik(self._vec(0)), self._d(6), self._d(7)))
        elif cmd == MOVEL:
            self._move(arm_sim.MoveLMotion(sim, self._vec(0), self._d(6), self._d(7)))
        elif cmd == MOVEL_FK:
            self._move(arm_sim.MoveLMotion(sim, sim.tcp_pose(self._vec(0)), self._d(6), self._d(7)))
        elif cmd in (SERVOJ, SERVOL):
            q = self._vec(0) if cmd == SERVOJ else self._servo_ik(self._vec(0))
            if isinstance(sim.motion, arm_sim.ServoMotion):
                sim.motion.update(q, self._d(9), self._d(10))
            else:
                sim.start(arm_sim.ServoMotion(q, self._d(9), self._d(10)))
        elif cmd in (SPEEDJ, SPEEDL):
            tool = cmd == SPEEDL
            motion = sim.motion
            if isinstance(motion, arm_sim.SpeedMotion) and motion.tool == tool:
                motion.update(self._vec(0), self._d(6))
            else:
                sim.start(arm_sim.SpeedMotion(self._vec(0), self._d(6), tool))
        elif cmd in (SPEED_STOP, SERVO_STOP):
            tool = cmd == SERVO_STOP or (isinstance(sim.motion, arm_sim.SpeedMotion) and sim.motion.tool)
            self._stop(arm_sim.StopMotion(self._d(0), tool=tool))
        elif cmd in (STOPL, STOPJ):
            motion = arm_sim.StopMotion(self._d(0), tool=cmd == STOPL)
            if self._i(1) == 1:
                sim.start(motion)
                self.async_motion = motion
                self._write_async(0)
            else:
                self._stop(motion)
        elif cmd == SET_TCP:
            sim.tcp_offset = self._vec(0)
        elif cmd == GET_TCP_OFFSET:
            self._out_vec(sim.tcp_offset)
        elif cmd == PROTECTIVE_STOP:
            sim.protective_stop("protective_stop() called by the program")
        elif cmd == SET_WATCHDOG:
            frequency = self._d(0)
            self.watchdog_period_s = 1.0 / frequency if frequency > 0 else 0.0
            self.watchdog_last_s = sim.time_s
        elif cmd == GET_FORWARD_KINEMATICS_DEFAULT:
            self._out_vec(sim.tcp_pose())
        elif cmd == GET_FORWARD_KINEMATICS_ARGS:
            self._out_vec(kin.forward(sim.model, self._vec(0), self._vec(6)))
        elif cmd == GET_ACTUAL_TOOL_FLANGE_POSE:
            self._out_vec(sim.flange_pose())
        elif cmd == GET_INVERSE_KINEMATICS_DEFAULT:
            self._out_vec(sim.ik(self._vec(0)))
        elif cmd == GET_INVERSE_KINEMATICS_ARGS:
            self._out_vec(sim.ik(self._vec(0), self._vec(6)))
        elif cmd in (GET_INVERSE_KINEMATICS_HAS_SOLUTION_DEFAULT, GET_INVERSE_KINEMATICS_HAS_SOLUTION_ARGS):
            seed = sim.q if cmd == GET_INVERSE_KINEMATICS_HAS_SOLUTION_DEFAULT else self._vec(6)
            try:
                sim.ik(self._vec(0), seed)
                self._out_int(1, 1)
            except kin.IKError:
                self._out_int(1, 0)
        elif cmd == IS_POSE_WITHIN_SAFETY_LIMITS:
            pos = self._vec(0)[:3]
            lo, hi = np.asarray(sim.safety.workspace_min_m), np.asarray(sim.safety.workspace_max_m)
            self._out_int(1, int(bool(np.all(pos >= lo) and np.all(pos <= hi))))
        elif cmd == IS_JOINTS_WITHIN_SAFETY_LIMITS:
            self._out_int(1, int(kin.within_joint_limits(sim.model, self._vec(0))))
        elif cmd == IS_STEADY:
            self._out_int(1, int(sim.motion is None and not np.any(sim.qd)))
        elif cmd == STOP_SCRIPT:
            self.log("Received stop script!")
        elif cmd == MOVE_PATH:
            if not self.path:
                self.log("move path: the uploaded script holds no path")
                return
            self._move(PathMotion(sim, self.path, self._on_waypoint))
        elif cmd in NO_EFFECT:
            self.log(f"command {cmd} acknowledged; it has no effect on the emulated arm")
        else:
            # Acknowledging would let the client believe it ran: end the program instead, as a script error would.
            self.log(f"command {cmd} is not emulated: program stopped")
            self.end(f"command {cmd} not emulated")

    def _on_waypoint(self, index: int) -> None:
        if self.async_motion is not None:
            self._write_async(index)

    def _servo_ik(self, pose: np.ndarray) -> np.ndarray:
        """get_inverse_kin of a servoL target. The script re-solves every tick while the command stays in the
        register; the same pose gives the same joints, and a new pose is solved from the previous solution (the
        branch nearest the arm, found in one or two iterations instead of a dozen)."""
        key = pose.tobytes()
        if self._servo_cache is not None and self._servo_cache[0] == key:
            return self._servo_cache[1]
        seed = self.sim.q if self._servo_cache is None or self.sim.motion is None else self._servo_cache[1]
        q = self.sim.ik(pose, seed)
        self._servo_cache = (key, q)
        return q

    def _stop(self, motion: arm_sim.StopMotion) -> None:
        """A synchronous stop: nothing to do when the arm is already still."""
        if self.sim.motion is None and not np.any(self.sim.qd):
            return
        self.sim.start(motion)
        self.blocking = motion
