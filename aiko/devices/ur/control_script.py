"""The register protocol of ur_rtde's control script, executed in Python instead of URScript.

``RTDEControlInterface`` uploads ``rtde_control.script`` (ur_rtde 1.6.5, ``scripts/rtde_control.script``) to the
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

**Refusals.** A command the emulator does not carry out is never acknowledged. ur_rtde 1.6.5's
``sendCommand`` (``src/rtde_control_interface.cpp``) returns False, printing "RTDE control script is not running!"
on stderr, when the program is not PLAYING while it waits for the handshake; so the script *pauses*
(``runtime_state`` PAUSED, the arm stopped) on a refused command, the client sees False (a getter raises "... did
not succeed!"), clears the command register, and the script resumes on that clear: the session stays usable. A
real-time command returns True in ur_rtde before the controller has seen it (the real controller too); its refusal
shows on the client's next call. Refused are: what the emulated arm cannot model (direct torque and the dynamics
queries: it has no dynamic model; ``set_gravity``; force-mode types 1 and 3), and the commands whose body ur_rtde
stripped from the upload because the controller is too old (``ScriptClient::removeUnsupportedFunctions`` deletes
the ``$5.4`` ... lines): a real controller would answer those "done" without doing anything; the emulator refuses
them and names the version they need.

**Stale commands.** A freshly uploaded script ignores a command left in the register by an earlier program until
the client writes the register again (``reuploadScript`` does not clear it): a restarted script never re-runs it.
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
FORCE_MODE, FORCE_MODE_STOP, ZERO_FT_SENSOR = 6, 7, 8
SPEEDJ, SPEEDL, SERVOJ, SERVOC = 9, 10, 11, 12
SPEED_STOP, SERVO_STOP, SET_PAYLOAD, TEACH_MODE, END_TEACH_MODE = 15, 16, 17, 18, 19
FORCE_MODE_SET_DAMPING, FORCE_MODE_SET_GAIN_SCALING = 20, 21
SERVOL, TOOL_CONTACT, GET_STEPTIME, GET_ACTUAL_JOINT_POSITIONS_HISTORY, GET_TARGET_WAYPOINT = 24, 25, 26, 27, 28
SET_TCP, GET_INVERSE_KINEMATICS_ARGS, PROTECTIVE_STOP = 29, 30, 31
STOPL, STOPJ, SET_WATCHDOG = 33, 34, 35
IS_POSE_WITHIN_SAFETY_LIMITS, IS_JOINTS_WITHIN_SAFETY_LIMITS, GET_JOINT_TORQUES, POSE_TRANS = 36, 37, 38, 39
GET_TCP_OFFSET, JOG_START, JOG_STOP = 40, 41, 42
GET_FORWARD_KINEMATICS_DEFAULT, GET_FORWARD_KINEMATICS_ARGS = 43, 44
MOVE_PATH, GET_INVERSE_KINEMATICS_DEFAULT, IS_STEADY = 45, 46, 47
MOVE_UNTIL_CONTACT, FREEDRIVE_MODE, END_FREEDRIVE_MODE, GET_FREEDRIVE_STATUS = 51, 52, 53, 54
SET_EXTERNAL_FORCE_TORQUE, FT_RTDE_INPUT_ENABLE, ENABLE_EXTERNAL_FT_SENSOR = 55, 56, 57
GET_ACTUAL_TOOL_FLANGE_POSE, SET_GRAVITY = 58, 59
GET_INVERSE_KINEMATICS_HAS_SOLUTION_DEFAULT, GET_INVERSE_KINEMATICS_HAS_SOLUTION_ARGS = 60, 61
START_CONTACT_DETECTION, STOP_CONTACT_DETECTION, READ_CONTACT_DETECTION = 62, 63, 64
SET_TARGET_PAYLOAD, DIRECT_TORQUE = 65, 66
GET_MASS_MATRIX, GET_CORIOLIS_AND_CENTRIFUGAL_TORQUES, GET_TARGET_JOINT_ACCELERATIONS = 67, 68, 69
GET_JACOBIAN, GET_JACOBIAN_TIME_DERIVATIVE = 70, 71
WATCHDOG = 99
STOP_SCRIPT = 255

# The script's main loop treats these as real-time: processed every tick, the handshake stays "ready"
# (ur_rtde 1.6.5's script: 24, 11, 9, 10, 6, 25, 26, 27, 38, 58, 66..71).
REALTIME = frozenset({24, 11, 9, 10, 6, 25, 26, 27, 38, 58, 66, 67, 68, 69, 70, 71})

# ur_rtde's method behind each command number, for messages a user can act on.
COMMAND_NAMES = {
    1: "moveJ", 2: "moveJ_IK", 3: "moveL", 4: "moveL_FK", 6: "forceMode", 7: "forceModeStop", 8: "zeroFtSensor",
    9: "speedJ", 10: "speedL", 11: "servoJ", 12: "servoC", 15: "speedStop", 16: "servoStop", 17: "setPayload",
    18: "teachMode", 19: "endTeachMode", 20: "forceModeSetDamping", 21: "forceModeSetGainScaling", 24: "servoL",
    25: "toolContact", 26: "getStepTime", 27: "getActualJointPositionsHistory", 28: "getTargetWaypoint",
    29: "setTcp", 30: "getInverseKinematics", 31: "triggerProtectiveStop", 33: "stopL", 34: "stopJ",
    35: "setWatchdog", 36: "isPoseWithinSafetyLimits", 37: "isJointsWithinSafetyLimits", 38: "getJointTorques",
    39: "poseTrans", 40: "getTCPOffset", 41: "jogStart", 42: "jogStop", 43: "getForwardKinematics",
    44: "getForwardKinematics", 45: "movePath", 46: "getInverseKinematics", 47: "isSteady", 51: "moveUntilContact",
    52: "freedriveMode", 53: "endFreedriveMode", 54: "getFreedriveStatus", 55: "setExternalForceTorque",
    56: "ftRtdeInputEnable", 57: "enableExternalFtSensor", 58: "getActualToolFlangePose", 59: "setGravity",
    60: "getInverseKinematicsHasSolution", 61: "getInverseKinematicsHasSolution", 62: "startContactDetection",
    63: "stopContactDetection", 64: "readContactDetection", 65: "setTargetPayload", 66: "directTorque",
    67: "getMassMatrix", 68: "getCoriolisAndCentrifugalTorques", 69: "getTargetJointAccelerations",
    70: "getJacobian", 71: "getJacobianTimeDerivative", 99: "kickWatchdog", 255: "stopScript",
}  # fmt: skip

# Commands whose body ur_rtde keeps only for new enough controllers: (URScript call in the body, version needed).
# Absent from the upload, the real controller would run an empty branch and answer "done".
VERSION_GATED = {
    FORCE_MODE_SET_GAIN_SCALING: ("force_mode_set_gain_scaling(", "5.0"),
    TOOL_CONTACT: ("tool_contact(", "5.4"),
    GET_STEPTIME: ("get_steptime()", "5.4"),
    GET_ACTUAL_JOINT_POSITIONS_HISTORY: ("get_actual_joint_positions_history(", "5.4"),
    GET_TARGET_WAYPOINT: ("get_target_waypoint()", "5.3"),
    MOVE_UNTIL_CONTACT: ("tool_contact(", "5.4"),
    FREEDRIVE_MODE: ("freedrive_mode(", "5.10"),
    END_FREEDRIVE_MODE: ("end_freedrive_mode()", "5.10"),
    GET_FREEDRIVE_STATUS: ("get_freedrive_status()", "5.10"),
    FT_RTDE_INPUT_ENABLE: ("ft_rtde_input_enable(", "5.9"),
    GET_INVERSE_KINEMATICS_HAS_SOLUTION_DEFAULT: ("get_inverse_kin_has_solution(", "5.10 or 3.15"),
    GET_INVERSE_KINEMATICS_HAS_SOLUTION_ARGS: ("get_inverse_kin_has_solution(", "5.10 or 3.15"),
    START_CONTACT_DETECTION: ("tool_contact(", "5.4"),
    SET_TARGET_PAYLOAD: ("set_target_payload(", "5.10"),
    DIRECT_TORQUE: ("direct_torque(", "5.26"),
    GET_MASS_MATRIX: ("get_mass_matrix()", "5.23"),
    GET_CORIOLIS_AND_CENTRIFUGAL_TORQUES: ("get_coriolis_and_centrifugal_torques()", "5.23"),
    GET_TARGET_JOINT_ACCELERATIONS: ("get_target_joint_accelerations()", "5.23"),
    GET_JACOBIAN: ("get_jacobian()", "5.23"),
    GET_JACOBIAN_TIME_DERIVATIVE: ("get_jacobian_time_derivative()", "5.23"),
}

# What the emulated arm cannot do whatever the controller version: the reason the client is told.
NOT_MODELLED = {
    SET_GRAVITY: "the emulated arm has no dynamic model for a gravity direction to act on",
    DIRECT_TORQUE: "the emulated arm has no dynamic model (joint torques cannot drive it)",
    GET_MASS_MATRIX: "the emulated arm has no dynamic model",
    GET_CORIOLIS_AND_CENTRIFUGAL_TORQUES: "the emulated arm has no dynamic model",
    GET_TARGET_JOINT_ACCELERATIONS: "the emulated arm has no dynamic model",
    GET_JACOBIAN: "the emulated arm has no dynamic model",
    GET_JACOBIAN_TIME_DERIVATIVE: "the emulated arm has no dynamic model",
}

SCRIPT_MARKER = "def rtde_control():"

# tool_contact(): a contact is a force of at least this much against the direction of motion (N). UR does not
# publish its detector; this is the emulator's, on the plant's flange wrench.
CONTACT_FORCE_N = 5.0


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


def in_contact(sim: arm_sim.ArmSim, direction: np.ndarray) -> bool:
    """``tool_contact``: the flange meets a force of at least CONTACT_FORCE_N against ``direction`` (a twist)."""
    d = np.asarray(direction[:3], dtype=float)
    norm = float(np.linalg.norm(d))
    if norm < 1e-12:
        return False
    return float(sim.wrench_raw[:3] @ (d / norm)) <= -CONTACT_FORCE_N


class ContactMotion(arm_sim.Motion):
    """``move_until_contact``: speedL along ``xd`` until tool_contact in ``direction``, then back to the joints
    where the contact was first seen (one tick back, the detection's step-back)."""

    def __init__(self, xd: np.ndarray, direction: np.ndarray, accel: float) -> None:
        self.speed = arm_sim.SpeedMotion(xd, accel, tool=True)
        self.direction = direction if np.any(direction) else xd
        self.back: arm_sim.Motion | None = None

    def step(self, sim: arm_sim.ArmSim, dt: float) -> np.ndarray:
        if self.back is None and in_contact(sim, self.direction):
            self.back = arm_sim.MoveJMotion(sim.q, sim.joint_positions_back(1), 1.0, 3.0)
        if self.back is not None:
            q = self.back.step(sim, dt)
            self.done = self.back.done
            return q
        return self.speed.step(sim, dt)


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


class Refused(Exception):
    """A command the emulator does not carry out; the message is what the client's user is told."""


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
        text: str | None = None,
        controller_version: str = "",
        inputs_other: dict[str, object] | None = None,
    ) -> None:
        self.sim = sim
        self.in_int, self.in_double = in_int, in_double
        self.out_int, self.out_double = out_int, out_double
        self.offset = offset
        self.log = log
        self.path = path or []
        self.text = text
        self.controller_version = controller_version
        self.inputs_other = inputs_other if inputs_other is not None else {}
        self.running = True
        self.stop_reason = ""
        self.executing = False
        self.paused_for: int | None = None  # the refused command the program is paused on
        self.blocking: arm_sim.Motion | None = None
        self.async_motion: arm_sim.Motion | None = None
        self.async_wr_count = 0
        self.async_op_id = 0
        self.watchdog_period_s = 0.0
        self.watchdog_last_s = 0.0
        self.force_gain_scaling = 0.5  # the script's start-up force_mode_set_gain_scaling(0.5)
        self.force_damping = 0.025  # and force_mode_set_damping(0.025)
        self.contact_direction: np.ndarray | None = None
        self.contact_step_back = 0
        self.refusals = 0
        # A command already in the register when this program starts belongs to an earlier one (see module doc).
        self.stale_command: int | None = self._i(0) or None
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

    def _out_vec(self, values: np.ndarray, index: int = 0) -> None:
        for k in range(6):
            self.out_double[self.offset + index + k] = float(values[k])

    def _write_async(self, value: int) -> None:
        """``write_async_progress_register`` of the script (see the module docstring for the bit layout)."""
        self.async_wr_count = (self.async_wr_count + 1) % 128
        if value == 0:
            self.async_op_id = (self.async_op_id + 1) % 128
        word = self.async_wr_count * 65536 + self.async_op_id * 16777216
        if value >= 0:
            word += min(value, 32767) + 32768
        self._out_int(2, word)

    # --- the watchdog and fresh inputs ---------------------------------------------------------------------
    def input_updated(self, names: set[str], now_s: float) -> None:
        """A data package arrived carrying ``names``: feeds the watchdog on input_int_register_<offset> and
        makes the command register current (no longer an earlier program's)."""
        if f"input_int_register_{self.offset}" in names:
            self.watchdog_last_s = now_s
            self.stale_command = None

    def end(self, reason: str) -> None:
        self.running = False
        self.stop_reason = reason
        self.blocking = None
        self.async_motion = None

    @property
    def paused(self) -> bool:
        return self.paused_for is not None

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
        if self.paused_for is not None:
            self.resume_if_cleared()
            return
        cmd = NO_CMD if self.stale_command is not None else self._i(0)
        if self.async_motion is not None and self.sim.motion is not self.async_motion:
            self.async_motion = None
            self._write_async(-1)
        if self.blocking is not None:
            if self.sim.motion is self.blocking:
                return  # a synchronous move is running: the script is inside movej / movel
            self.blocking = None
            self._out_int(0, DONE_WITH_CMD)
            return
        if cmd in REALTIME:
            if self.process(cmd):
                self._out_int(0, READY_FOR_CMD)
        elif cmd == NO_CMD or cmd == WATCHDOG:
            self.executing = False
            self._out_int(0, READY_FOR_CMD)
        elif not self.executing:
            self.executing = True
            if not self.process(cmd):
                return
            if cmd == STOP_SCRIPT:
                self.end("stopScript")
            elif self.blocking is None:
                self._out_int(0, DONE_WITH_CMD)

    def resume_if_cleared(self) -> bool:
        """Resume a program paused on a refusal once the client has cleared the command register (ur_rtde does as
        soon as it sees the pause); True when it resumed now."""
        if self.paused_for is None or self._i(0) == self.paused_for:
            return False
        self.paused_for = None
        self.executing = False
        self._out_int(0, READY_FOR_CMD)
        return True

    def refuse(self, cmd: int, why: str) -> None:
        """Pause the program on ``cmd`` (see the module docstring): the arm stops, the client sees False."""
        name = COMMAND_NAMES.get(cmd, f"command {cmd}")
        self.log(f"{name} (command {cmd}) refused: {why}")
        self.refusals += 1
        self.paused_for = cmd
        self.blocking = None
        self.async_motion = None
        if self.sim.motion is not None or np.any(self.sim.qd):
            self.sim.start(arm_sim.StopMotion(4.0, tool=False))

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

    def process(self, cmd: int) -> bool:
        """Carry out ``cmd``; False when it was refused or ended the program (no handshake then)."""
        try:
            self._check_available(cmd)
            self._process(cmd, self.sim)
        except Refused as exc:
            self.refuse(cmd, str(exc))
            return False
        except kin.IKError as exc:
            # get_inverse_kin failing is a runtime error that ends the script on the controller.
            self.log(f"{COMMAND_NAMES.get(cmd, cmd)}: {exc}")
            self.end("inverse kinematics failed")
            return False
        return self.running

    def _check_available(self, cmd: int) -> None:
        if cmd in NOT_MODELLED:
            raise Refused(NOT_MODELLED[cmd])
        gated = VERSION_GATED.get(cmd)
        if gated is not None and self.text is not None and gated[0] not in self.text:
            raise Refused(
                f"needs PolyScope {gated[1]} or newer; for controller {self.controller_version} ur_rtde uploaded "
                f"the script without it (a real controller would answer 'done' and do nothing)"
            )

    def _process(self, cmd: int, sim: arm_sim.ArmSim) -> None:  # noqa: C901 - one branch per command, as the script
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
        elif cmd == SERVOC:
            self._servo_c(sim)
        elif cmd in (SPEEDJ, SPEEDL):
            tool = cmd == SPEEDL
            motion = sim.motion
            if isinstance(motion, arm_sim.SpeedMotion) and motion.tool == tool and not isinstance(motion, _Jog):
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
        elif cmd == FORCE_MODE:
            self._force_mode(sim)
        elif cmd == FORCE_MODE_STOP:
            if isinstance(sim.motion, arm_sim.ComplianceMotion):
                self._stop(arm_sim.StopMotion(10.0, tool=True))  # end_force_mode(); stopl(10)
        elif cmd == ZERO_FT_SENSOR:
            sim.wrench_offset = sim.wrench + sim.wrench_offset
        elif cmd == FORCE_MODE_SET_DAMPING:
            self.force_damping = min(max(self._d(0), 0.0), 1.0)
        elif cmd == FORCE_MODE_SET_GAIN_SCALING:
            self.force_gain_scaling = min(max(self._d(0), 0.0), 2.0)
        elif cmd in (SET_PAYLOAD, SET_TARGET_PAYLOAD):
            sim.payload_mass_kg = self._d(0)
            cog = np.array([self._d(1), self._d(2), self._d(3)])
            if np.any(cog) or self.controller_version.startswith("3"):  # 5.x keeps the CoG for a zero one
                sim.payload_cog_m = cog
        elif cmd in (TEACH_MODE, FREEDRIVE_MODE):
            if cmd == FREEDRIVE_MODE:
                axes, frame = [self._i(1 + k) for k in range(6)], self._vec(0)
            else:
                axes, frame = [1] * 6, np.zeros(6)
            sim.start(arm_sim.ComplianceMotion(frame, axes, np.zeros(6), [0.25] * 3 + [1.0] * 3,
                                               self.force_gain_scaling, self.force_damping))  # fmt: skip
        elif cmd in (END_TEACH_MODE, END_FREEDRIVE_MODE):
            if isinstance(sim.motion, arm_sim.ComplianceMotion):
                sim.start(arm_sim.StopMotion(10.0, tool=True))
        elif cmd == GET_FREEDRIVE_STATUS:
            self._out_int(1, int(isinstance(sim.motion, arm_sim.ComplianceMotion)))
        elif cmd == TOOL_CONTACT:
            self._out_int(1, int(in_contact(sim, self._vec(0) if np.any(self._vec(0)) else sim.tcp_speed())))
        elif cmd == GET_STEPTIME:
            self.out_double[self.offset] = sim.step_time_s
        elif cmd == GET_ACTUAL_JOINT_POSITIONS_HISTORY:
            self._out_vec(sim.joint_positions_back(self._i(1)))
        elif cmd == GET_TARGET_WAYPOINT:
            self._out_vec(_target_pose(sim))
        elif cmd == GET_JOINT_TORQUES:
            # get_joint_torques(): the torques beyond those that move the arm itself, i.e. those of the external
            # wrench on the flange: tau = J_flange^T w (w the plant's wrench on the flange, base frame).
            self._out_vec(sim.jacobian(tcp=False).T @ sim.wrench_raw)
        elif cmd == POSE_TRANS:
            self._out_vec(kin.matrix_to_pose(kin.pose_to_matrix(self._vec(0)) @ kin.pose_to_matrix(self._vec(6))))
        elif cmd == JOG_START:
            self._jog(sim)
        elif cmd == JOG_STOP:
            if isinstance(sim.motion, _Jog):
                self._stop(arm_sim.StopMotion(1.2, tool=True))
        elif cmd == MOVE_UNTIL_CONTACT:
            self._move(ContactMotion(self._vec(0), self._vec(6), self._d(12)))
        elif cmd in (FT_RTDE_INPUT_ENABLE, ENABLE_EXTERNAL_FT_SENSOR):
            if self._i(1) == 1:
                sim.external_wrench = np.asarray(self.inputs_other.get("external_force_torque", [0.0] * 6), float)
            else:
                sim.external_wrench = None
        elif cmd == SET_EXTERNAL_FORCE_TORQUE:
            pass  # the values travel in the RTDE input external_force_torque (see UR3Emulator._data_in)
        elif cmd == START_CONTACT_DETECTION:
            self.contact_direction = self._vec(0)
            self.contact_step_back = 0
        elif cmd == STOP_CONTACT_DETECTION:
            self.contact_direction = None
            self._out_int(1, self.contact_step_back)
        elif cmd == READ_CONTACT_DETECTION:
            self._out_int(1, self.contact_step_back)
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
                raise Refused("the uploaded script holds no move path")
            self._move(PathMotion(sim, self.path, self._on_waypoint))
        else:
            # The real script has no branch for it and would answer "done": the emulator does not pretend.
            raise Refused("not a command of ur_rtde's control script")

    def contact_tick(self) -> None:
        """start_contact_detection's thread: on a contact, stop and go back to where it was first seen."""
        if self.contact_direction is None or self.contact_step_back:
            return
        direction = self.contact_direction if np.any(self.contact_direction) else self.sim.tcp_speed()
        if in_contact(self.sim, direction):
            self.contact_step_back = 1
            self.sim.start(arm_sim.MoveJMotion(self.sim.q, self.sim.joint_positions_back(1), 1.0, 3.0))

    def _force_mode(self, sim: arm_sim.ArmSim) -> None:
        kind = self._i(1)
        if kind != 2:
            raise Refused(f"force mode type {kind} is not emulated (only type 2: the task frame as given)")
        selection = [self._i(2 + k) for k in range(6)]
        frame, wrench, limits = self._vec(0), self._vec(6), self._vec(12)
        if isinstance(sim.motion, arm_sim.ComplianceMotion):
            sim.motion.update(frame, selection, wrench, limits)
            sim.motion.gain_scaling, sim.motion.damping = self.force_gain_scaling, self.force_damping
        else:
            sim.start(arm_sim.ComplianceMotion(frame, selection, wrench, limits,
                                               self.force_gain_scaling, self.force_damping))  # fmt: skip

    def _servo_c(self, sim: arm_sim.ArmSim) -> None:
        """servoc: a linear move to the latest target at the given speed and acceleration (blend ignored)."""
        target = self._vec(0)
        motion = sim.motion
        if isinstance(motion, _ServoC) and np.array_equal(motion.pose1, target):
            return
        sim.start(_ServoC(sim, target, self._d(6), self._d(7)))

    def _jog(self, sim: arm_sim.ArmSim) -> None:
        """start_jog: speedl towards the jog speed given in the base (0), tool (1) or a custom (2) feature."""
        feature = int(round(self._d(6)))
        if isinstance(sim.motion, _Jog):
            frame = sim.motion.frame
        elif feature == 0:
            frame = np.eye(3)
        elif feature == 1:
            frame = kin.pose_to_matrix(sim.tcp_pose())[:3, :3]
        elif feature == 2:
            frame = kin.pose_to_matrix(self._vec(8))[:3, :3]
        else:
            raise Refused(f"jog feature {feature} is not 0 (base), 1 (tool) or 2 (custom)")
        speed = self._vec(0)
        twist = np.concatenate([frame @ speed[:3], frame @ speed[3:]])
        if isinstance(sim.motion, _Jog):
            sim.motion.update(twist, self._d(7))
        else:
            sim.start(_Jog(twist, self._d(7), frame))

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


class _Jog(arm_sim.SpeedMotion):
    def __init__(self, twist: np.ndarray, accel: float, frame: np.ndarray) -> None:
        super().__init__(twist, accel, tool=True)
        self.frame = frame


class _ServoC(arm_sim.MoveLMotion):
    pass


def _target_pose(sim: arm_sim.ArmSim) -> np.ndarray:
    """get_target_waypoint: the pose the running move goes to (the TCP's own pose when none runs)."""
    motion = sim.motion
    if isinstance(motion, arm_sim.MoveLMotion):
        return motion.pose1.copy()
    if isinstance(motion, arm_sim.MoveJMotion):
        return sim.tcp_pose(motion.q1)
    return sim.tcp_pose()
