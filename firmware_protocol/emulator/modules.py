"""The emulated Aiko joint modules: the ATmega128 firmware's state machine and control loop in Python.

All modules share one vectorised physics state and one plant. This is the firmware's half of the emulator; the
bus half (lockstep stepping, the real-time thread, timestamps) is `transport.BusTransport`, which drives these
modules or the real firmware in the AVR simulator (`firmware.FirmwareModules`) the same way.

Firmware behaviour emulated: references are accepted only with a valid length, range and a sequence number
1..SEQUENCE_WINDOW ahead of the last accepted one (everything else is rejected, counted and never actuated; a
jump beyond the window does not move the module's notion of the last sequence, so a forged frame cannot lock the
real sender out); parameter writes are accepted only while the module is not enabled, inside their ranges, with the
watchdog timeout (WatchdogPeriods x ReferencePeriodMs) inside the protocol's floor and ceiling; a module with no
valid reference for `watchdog_periods` reference periods disables its drive (short brake) and flags WATCHDOG; an
emergency stop disables every module in the frame handler, before the next controller tick.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

import can
import numpy as np

from firmware_protocol.codec import AikoCodec, MessageLayout, default_codec
from firmware_protocol.dbc import ESTOP_KEY, Command, MessageKind, ModuleState, Parameter, ParameterResult
from firmware_protocol.emulator import fast
from firmware_protocol.emulator.config import EmulatorConfig, EmulatorConfigError
from firmware_protocol.emulator.controller import controller_update, new_controller_state
from firmware_protocol.emulator.drive import drive_substep, new_drive_state
from firmware_protocol.emulator.plant import IndependentInertiaParams, IndependentInertiaPlant, JointPlant
from firmware_protocol.emulator.rules import (
    FIRMWARE_VERSION,
    REJECTION_REASONS,
    parameter_write_result,
    sequence_verdict,
)
from firmware_protocol.errors import FrameLengthError, SignalRangeError

log = logging.getLogger(__name__)

Emit = Callable[[int, bytes, float], None]
"""How modules send a frame: ``emit(frame_id, data, time_s)``, time_s on the modules' own clock."""


def _nowhere(frame_id: int, data: bytes, time_s: float) -> None:
    """The ``emit`` of modules not connected to a bus: their frames are dropped."""


def compiled_runner(plant: JointPlant) -> Callable | None:
    """The plant's ``run_module_ticks``, unless a subclass overrides ``advance`` or ``joint_state`` below the class
    that defines it (a plant that records or perturbs its sub-steps must see every one of them)."""
    runner = getattr(plant, "run_module_ticks", None)
    if runner is None:
        return None
    for klass in type(plant).__mro__:
        if "run_module_ticks" in vars(klass):
            return runner
        if "advance" in vars(klass) or "joint_state" in vars(klass):
            return None
    return runner


def plant_for(config: EmulatorConfig, plant: JointPlant | None = None) -> JointPlant:
    """The modules' plant: the one given, else the independent inertias at the configured limits; its joint state
    must hold one (horizontal, vertical) pair per module (the Python modules and the firmware both need that)."""
    n = config.n_modules
    chosen: JointPlant = plant or IndependentInertiaPlant(
        n, IndependentInertiaParams(limit_h_rad=config.limit_h_rad, limit_v_rad=config.limit_v_rad)
    )
    angles, rates = chosen.joint_state()
    if np.shape(angles) != (n, 2) or np.shape(rates) != (n, 2):
        raise EmulatorConfigError(
            f"plant.joint_state() returned shapes {np.shape(angles)}, {np.shape(rates)}; "
            f"expected ({n}, 2) for {n} modules (node_ids {config.node_ids})"
        )
    return chosen


class EmulatedModules:
    """Ten (configurable) emulated joint modules sharing one plant: the firmware's state machine in Python.

    Frames come in through ``handle_frame`` (between controller ticks, as the firmware's receive interrupt would
    deliver them), time goes on with ``run_ticks``, and every frame a module sends goes out through ``emit``
    (``emit(frame_id, data, time_s)``, set by the transport that connects the modules to a bus)."""

    def __init__(
        self,
        config: EmulatorConfig | None = None,
        plant: JointPlant | None = None,
        *,
        use_reference: bool = False,
    ) -> None:
        """``use_reference``: run every tick through the readable numpy path (``_run_tick``) even if the plant
        has a compiled step (``run_module_ticks``); the fast path must give the same result, bit for bit."""
        self.emit: Emit = _nowhere
        self.use_reference = use_reference
        self.config = config or EmulatorConfig()
        c = self.config
        n = c.n_modules
        self.plant: JointPlant = plant_for(c, plant)
        angles, _ = self.plant.joint_state()
        self._codec: AikoCodec = default_codec()
        self._row_of_node = {node: i for i, node in enumerate(c.node_ids)}
        self.dt_s = 1.0 / c.controller_rate_hz
        self.tick = 0

        self.drive = new_drive_state(n)
        self.drive.gear_angle_rad[...] = angles
        self.controller = new_controller_state(c.gains, n, self._measurement())
        self.state = np.full(n, int(ModuleState.DISABLED))
        self.watchdog = np.zeros(n, bool)
        self.watchdog_trip_s = np.full(n, np.nan)  # controller-tick time of the last watchdog trip
        self.estop = np.zeros(n, bool)
        self.fault = np.zeros(n, bool)
        self.reference_rad = np.array(angles, dtype=float, copy=True)
        self.reference_rate_rad_s = np.zeros((n, 2))
        self.reference_time_s = np.zeros(n)
        self.last_valid_reference_s = np.zeros(n)
        self.last_sequence = np.full(n, -1)
        self.at_limit = np.zeros((n, 2), bool)
        self.saturated = np.zeros((n, 2), bool)
        self.effort = np.zeros((n, 2))
        self.limits_rad = np.tile([c.limit_h_rad, c.limit_v_rad], (n, 1))
        self.watchdog_periods = np.full(n, float(c.watchdog_periods))
        self.reference_period_s = np.full(n, float(c.reference_period_s))
        self.feedback_rate_hz = np.full(n, float(c.feedback_rate_hz))
        self.accepted_references = np.zeros(n, np.int64)
        # what the PC's stream looked like from here: the longest time without a valid reference while enabled (what
        # the watchdog measures) and the shortest between two (a burst after a stall would show here)
        self.max_reference_gap_s = np.zeros(n)
        self.min_reference_spacing_s = np.full(n, np.inf)
        self.ignored_while_disabled = np.zeros(n, np.int64)  # valid references to a disabled module
        self.watchdog_trips = np.zeros(n, np.int64)
        # controller ticks in which each axis hit the H-bridge current limit while enabled (and the enabled axis ticks
        # in all): whether an injected torque limit binds in a run (one that never does leaves no trace in the log to
        # identify it from). Per tick, not per sub-step: one add per tick keeps the lockstep loop's cost.
        self.current_limited_ticks = np.zeros((n, 2), np.int64)
        self.enabled_axis_ticks = np.zeros(1, np.int64)  # an array: the compiled ticks add to it in place
        self.parameter_writes_accepted = np.zeros(n, np.int64)
        self.rejected = {reason: np.zeros(n, np.int64) for reason in REJECTION_REASONS}
        self.unknown_id_frames = 0
        self._fast_parameters = fast.module_parameters(c)
        # scratch of the compiled kernels: demand, enabled, tripped, saturation within the tick, sub-step torques
        self._fast_scratch = (
            np.zeros((n, 2)), np.zeros(n, bool), np.zeros(n, bool), np.zeros((n, 2), bool), np.zeros((n, 2)),
            np.zeros((n, 2), bool),
        )  # fmt: skip
        self._load_compiled_runner()

    # ------------------------------------------------------------------ time
    @property
    def time_s(self) -> float:
        return self.tick * self.dt_s

    # ----------------------------------------------------------- the tick
    def _measurement(self) -> np.ndarray:
        if self.config.sensor == "gear":
            return self.drive.gear_angle_rad
        return np.asarray(self.plant.joint_state()[0])

    def _run_tick(self) -> None:
        c = self.config
        t = self.time_s
        enabled = self.state == ModuleState.ENABLED
        timeout_s = self.watchdog_periods * self.reference_period_s
        tripped = enabled & (t - self.last_valid_reference_s > timeout_s + 1e-9)
        if tripped.any():
            self.state[tripped] = ModuleState.WATCHDOG
            self.watchdog[tripped] = True
            self.watchdog_trip_s[tripped] = t
            self.watchdog_trips[tripped] += 1
            enabled &= ~tripped
            self._log_watchdog_trips(tripped)

        measurement = self._measurement()
        reference = np.clip(self.reference_rad, -self.limits_rad, self.limits_rad)
        if c.reference_hold == "linear":
            reference = reference + self.reference_rate_rad_s * (t - self.reference_time_s)[:, None]
            reference = np.clip(reference, -self.limits_rad, self.limits_rad)
        # at a limit, a rate feed-forward pointing outwards would hold the joint beyond it: drop it there
        reference_rate = self.reference_rate_rad_s
        reference_rate = np.where(
            (np.abs(reference) >= self.limits_rad) & (reference * reference_rate > 0), 0.0, reference_rate
        )
        back_emf = c.drive.torque_constant_nm_a * c.drive.gear_ratio
        demand_v = controller_update(
            c.gains, self.controller, measurement, reference, reference_rate, back_emf, self.dt_s
        )
        supply = c.drive.supply_v
        voltage = np.clip(demand_v, -supply, supply)
        voltage[~enabled] = 0.0
        self.drive.voltage_v[...] = voltage
        self.drive.brake[...] = ~enabled[:, None]
        self.effort[...] = voltage / supply
        self.at_limit[...] = np.abs(measurement) >= self.limits_rad - math.radians(0.5)

        self._send_due_frames()

        substep = self.dt_s / c.physics_substeps
        saturated = np.abs(demand_v) > supply
        limited = np.zeros_like(saturated)
        for _ in range(c.physics_substeps):
            angles, rates = self.plant.joint_state()
            torques = drive_substep(c.drive, self.drive, angles, rates, substep)
            limited |= self.drive.current_limited
            self.plant.advance(torques, substep)
        limited &= enabled[:, None]
        self.current_limited_ticks += limited
        self.enabled_axis_ticks[0] += 2 * int(enabled.sum())
        self.saturated[...] = (saturated | limited) & enabled[:, None]
        self.tick += 1

    def run_ticks(self, target: int) -> None:
        """Run ticks until ``self.tick == target``: in compiled batches from one frame event to the next if the
        plant has a compiled step (``run_module_ticks``), else tick by tick through the readable ``_run_tick``."""
        runner = None if self.use_reference else compiled_runner(self.plant)
        if runner is None:
            while self.tick < target:
                self._run_tick()
            return
        arrays = self._module_arrays()
        feedback_divisor = self._feedback_divisors()
        heartbeat_divisor = self._heartbeat_divisor()
        resume = False
        while self.tick < target:
            done, event, failure = runner(
                target - self.tick,
                self.tick,
                resume,
                self._fast_parameters,
                arrays,
                feedback_divisor,
                heartbeat_divisor,
            )
            self.tick += done
            if failure is not None:  # as in _run_tick, the failing tick is not counted
                raise failure
            resume = event == fast.EVENT_FRAMES
            if resume:  # the controller phase of self.tick ran: what _run_tick does before the physics
                self._log_watchdog_trips(arrays.tripped)
                self._send_due_frames()
            elif event != fast.EVENT_NONE:
                raise RuntimeError(f"plant.run_module_ticks returned event {event} without an error")

    def _load_compiled_runner(self) -> None:
        """Compile (or load from numba's cache) the plant's batch of ticks now, with zero ticks: not in the first
        tick of a real-time emulator, which would then answer its first frames a second late."""
        runner = None if self.use_reference else compiled_runner(self.plant)
        if runner is not None:
            arrays = self._module_arrays()
            runner(0, self.tick, False, self._fast_parameters, arrays, self._feedback_divisors(), 0)

    def _module_arrays(self) -> fast.ModuleArrays:
        d, k = self.drive, self.controller
        return fast.ModuleArrays(
            self.state, self.watchdog, self.watchdog_trip_s, self.watchdog_trips, self.last_valid_reference_s,
            self.watchdog_periods, self.reference_period_s, self.reference_rad, self.reference_rate_rad_s,
            self.reference_time_s, self.limits_rad, k.kp, k.kd, k.rate_estimate_rad_s, k.previous_measurement_rad,
            d.gear_angle_rad, d.gear_rate_rad_s, d.voltage_v, d.brake, d.current_limited, self.effort, self.at_limit,
            self.saturated, self.current_limited_ticks, self.enabled_axis_ticks, *self._fast_scratch,
        )  # fmt: skip

    def _log_watchdog_trips(self, tripped: np.ndarray) -> None:
        for row in np.flatnonzero(tripped):
            log.warning(
                "module %d: no valid reference since t=%.3f s, watchdog tripped at t=%.3f s, drive disabled",
                self.config.node_ids[row],
                self.last_valid_reference_s[row],
                self.time_s,
            )

    def _send_due_frames(self) -> None:
        """The frames of this tick: feedback (+ rates) of every module due, then the heartbeats."""
        c = self.config
        if c.feedback_rate_hz > 0 or self.feedback_rate_hz.any():
            divisor = self._feedback_divisors()
            due = (divisor > 0) & (self.tick % np.maximum(divisor, 1) == 0)
            self._send_feedbacks(np.flatnonzero(due), rates=True)
        heartbeat = self._heartbeat_divisor()
        if heartbeat > 0 and self.tick % heartbeat == 0:
            for row in range(c.n_modules):
                self._send_heartbeat(row)

    def _feedback_divisors(self) -> np.ndarray:
        """Ticks between two feedback frames of each module (0: none)."""
        rate_hz = self.feedback_rate_hz
        divisor = np.where(
            rate_hz > 0,
            np.maximum(1, np.round(self.config.controller_rate_hz / np.maximum(rate_hz, 1e-9))),
            0,
        )
        return divisor.astype(np.int64)

    def _heartbeat_divisor(self) -> int:
        c = self.config
        return max(1, round(c.controller_rate_hz / c.heartbeat_rate_hz)) if c.heartbeat_rate_hz > 0 else 0

    # ----------------------------------------------------------- frames out
    def _send(self, kind: MessageKind, row: int, values: dict) -> None:
        self._send_encoded(self._codec.layout(kind, self.config.node_ids[row]), values)

    def _send_encoded(self, layout: MessageLayout, values: dict) -> None:
        self.emit(layout.frame_id, layout.encode(values), self.time_s)

    def status_flags(self, row: int) -> dict[str, int]:
        return {
            "Enabled": int(self.state[row] == ModuleState.ENABLED),
            "Fault": int(self.fault[row] or self.estop[row]),
            "Watchdog": int(self.watchdog[row]),
            "AtLimit": int(self.at_limit[row].any()),
            "Saturated": int(self.saturated[row].any()),
            "EStop": int(self.estop[row]),
        }

    def _send_feedback(self, row: int, rates: bool) -> None:
        self._send_feedbacks(np.array([row]), rates)

    def _send_feedbacks(self, rows: np.ndarray, rates: bool) -> None:
        """JointFeedback (and, with ``rates``, JointRates) of each of ``rows``, in row order; the signal values of
        all modules are computed at once (the same elementwise operations as one module at a time)."""
        c = self.config
        angles_deg = np.degrees(np.clip(self._measurement(), -math.pi, math.pi)).tolist()
        effort = np.clip(self.effort, -1.0, 1.0).tolist()
        sequence = np.maximum(self.last_sequence, 0).tolist()
        enabled = (self.state == ModuleState.ENABLED).tolist()
        fault = (self.fault | self.estop).tolist()
        watchdog, estop = self.watchdog.tolist(), self.estop.tolist()
        at_limit, saturated = self.at_limit.any(axis=1).tolist(), self.saturated.any(axis=1).tolist()
        if rates:
            rate_deg = np.clip(np.degrees(self.controller.rate_estimate_rad_s), -1638.4, 1638.35).tolist()
            rejected = sum(v for v in self.rejected.values()).tolist()
            accepted = self.accepted_references.tolist()
        for row in rows.tolist():
            node = c.node_ids[row]
            values = {
                "AngleH": angles_deg[row][0],
                "AngleV": angles_deg[row][1],
                "EffortH": effort[row][0],
                "EffortV": effort[row][1],
                "RefSequence": sequence[row],
                "Enabled": int(enabled[row]),
                "Fault": int(fault[row]),
                "Watchdog": int(watchdog[row]),
                "AtLimit": int(at_limit[row]),
                "Saturated": int(saturated[row]),
                "EStop": int(estop[row]),
            }
            self._send_encoded(self._codec.layout(MessageKind.FEEDBACK, node), values)
            if rates:
                values = {
                    "RateH": rate_deg[row][0],
                    "RateV": rate_deg[row][1],
                    "RejectedFrames": rejected[row] & 0xFFFF,
                    "AcceptedReferences": accepted[row] & 0xFFFF,
                }
                self._send_encoded(self._codec.layout(MessageKind.RATES, node), values)

    def _send_heartbeat(self, row: int) -> None:
        uptime = min(int(self.time_s), 0xFFFF)
        values = {"State": int(self.state[row]), "FirmwareVersion": FIRMWARE_VERSION, "Uptime": uptime}
        self._send(MessageKind.HEARTBEAT, row, values)

    # ------------------------------------------------------------ frames in
    def handle_frame(self, msg: can.Message) -> None:
        """Firmware receive path: classify, validate, count rejections, act on valid frames only."""
        if msg.is_error_frame:
            return
        classified = None
        if not (msg.is_extended_id or msg.is_remote_frame or msg.is_fd):
            classified = self._codec.scheme.classify(msg.arbitration_id)
        if classified is None:
            self.unknown_id_frames += 1
            log.debug("unknown frame id 0x%X rejected", msg.arbitration_id)
            return
        kind, node = classified
        if kind is MessageKind.EMERGENCY_STOP:
            self._on_estop(msg)
        elif kind is MessageKind.COMMAND:
            self._on_command(msg)
        elif node in self._row_of_node:
            row = self._row_of_node[node]
            if kind is MessageKind.REFERENCE:
                self._on_reference(row, msg)
            elif kind is MessageKind.PARAMETER_REQUEST:
                self._on_parameter(row, msg)
            # module-to-PC kinds addressed to our own node ids are our own echo: ignore

    def _reject(self, reason: str, rows, detail: str) -> None:
        self.rejected[reason][rows] += 1
        log.debug("rejected (%s): %s", reason, detail)

    def _decode(self, msg: can.Message, rows) -> dict | None:
        try:
            return self._codec.decode(msg.arbitration_id, bytes(msg.data)).values
        except FrameLengthError as exc:
            self._reject("wrong_dlc", rows, str(exc))
        except SignalRangeError as exc:
            self._reject("out_of_range", rows, str(exc))
        return None

    def _on_estop(self, msg: can.Message) -> None:
        every = slice(None)
        values = self._decode(msg, every)
        if values is None:
            return
        if int(values["Key"]) != ESTOP_KEY:
            self._reject("bad_estop_key", every, f"key 0x{int(values['Key']):02X}")
            return
        self.estop[:] = True
        self.state[:] = ModuleState.ESTOP
        self.drive.voltage_v[...] = 0.0  # at once: the drive is cut in the receive interrupt
        self.drive.brake[...] = True
        self.effort[...] = 0.0
        log.warning("emergency stop received at t=%.4f s: all modules disabled", self.time_s)

    def _on_command(self, msg: can.Message) -> None:
        values = self._decode(msg, slice(None))
        if values is None:
            return
        target = int(values["TargetNode"])
        if target != 0 and target not in self._row_of_node:
            return  # addressed to a module we do not emulate
        rows = list(range(self.config.n_modules)) if target == 0 else [self._row_of_node[target]]
        try:
            command = Command(int(values["Command"]))
        except ValueError:
            self._reject("unknown_command", rows, f"command {int(values['Command'])}")
            return
        for row in rows:
            self._apply_command(row, command)

    def _apply_command(self, row: int, command: Command) -> None:
        if command is Command.CLEAR_FAULTS:
            self.estop[row] = self.fault[row] = self.watchdog[row] = False
            if self.state[row] in (ModuleState.ESTOP, ModuleState.FAULT, ModuleState.WATCHDOG):
                self.state[row] = ModuleState.DISABLED
        elif command is Command.DISABLE:
            if self.state[row] == ModuleState.ENABLED:
                self.state[row] = ModuleState.DISABLED
                # the drive brakes in the frame handler, as the firmware does (and as for an e-stop), not a tick later
                self.drive.voltage_v[row] = 0.0
                self.drive.brake[row] = True
                self.effort[row] = 0.0
        elif command is Command.ENABLE:
            if self.estop[row] or self.fault[row]:
                return  # needs CLEAR_FAULTS first
            self.watchdog[row] = False
            self.state[row] = ModuleState.ENABLED
            measurement = self._measurement()[row]
            self.reference_rad[row] = measurement  # hold where it is: enabling never jumps
            self.reference_rate_rad_s[row] = 0.0
            self.reference_time_s[row] = self.time_s
            self.last_valid_reference_s[row] = self.time_s
            self.last_sequence[row] = -1
            self.controller.previous_measurement_rad[row] = measurement
            self.controller.rate_estimate_rad_s[row] = 0.0

    def _on_reference(self, row: int, msg: can.Message) -> None:
        values = self._decode(msg, row)
        if values is None:
            return
        if self.state[row] != ModuleState.ENABLED:
            # a disabled module ignores references (not bad traffic); its sequence restarts at the next Enable
            self.ignored_while_disabled[row] += 1
            return
        sequence = int(values["Sequence"])
        last = int(self.last_sequence[row])
        verdict = sequence_verdict(sequence, last)
        if verdict is not None:  # the last accepted sequence stays: the real sender's next frame still fits
            self._reject(verdict, row, f"node {self.config.node_ids[row]} seq {sequence} after {last}")
            return
        self.last_sequence[row] = sequence
        gap_s = self.time_s - self.last_valid_reference_s[row]  # since the last one, or since Enable for the first
        self.max_reference_gap_s[row] = max(self.max_reference_gap_s[row], gap_s)
        if last >= 0:
            self.min_reference_spacing_s[row] = min(self.min_reference_spacing_s[row], gap_s)
        angles = np.radians([values["AngleH"], values["AngleV"]])
        self.reference_rad[row] = np.clip(angles, -self.limits_rad[row], self.limits_rad[row])
        self.reference_rate_rad_s[row] = np.radians([values["RateH"], values["RateV"]])
        self.reference_time_s[row] = self.time_s
        self.last_valid_reference_s[row] = self.time_s
        self.accepted_references[row] += 1
        if self.config.reply_to_references:
            self._send_feedback(row, rates=False)

    def _on_parameter(self, row: int, msg: can.Message) -> None:
        values = self._decode(msg, row)
        if values is None:
            return
        data = bytes(msg.data)
        if data[1] & 0xFE or data[2] or data[3]:  # bits the DBC does not define must be 0 (aiko_joint.c agrees)
            self._reject("reserved_bits", row, f"parameter request {data.hex()}")
            return
        index, write, value = int(values["Index"]), int(values["Write"]), float(values["Value"])
        try:
            parameter = Parameter(index)
        except ValueError:
            self._reply_parameter(row, index, ParameterResult.UNKNOWN_INDEX, 0.0)
            return
        if write:
            result = parameter_write_result(
                int(self.state[row]),
                index,
                value,
                float(self.watchdog_periods[row]),
                float(self.reference_period_s[row] * 1e3),
            )
            if result is ParameterResult.LOCKED:
                self._reject("parameter_while_enabled", row, f"parameter {parameter.name} = {value}")
            elif result is ParameterResult.OUT_OF_RANGE:
                self._reject("out_of_range", row, f"parameter {parameter.name} = {value}")
            if result is not ParameterResult.OK:
                self._reply_parameter(row, index, result, self._read_parameter(row, parameter))
                return
            self._write_parameter(row, parameter, value)
            self.parameter_writes_accepted[row] += 1
        self._reply_parameter(row, index, ParameterResult.OK, self._read_parameter(row, parameter))

    def _read_parameter(self, row: int, p: Parameter) -> float:
        d = self.config.drive
        table = {
            Parameter.KP_H: self.controller.kp[row, 0],
            Parameter.KD_H: self.controller.kd[row, 0],
            Parameter.KP_V: self.controller.kp[row, 1],
            Parameter.KD_V: self.controller.kd[row, 1],
            Parameter.LIMIT_H_DEG: math.degrees(self.limits_rad[row, 0]),
            Parameter.LIMIT_V_DEG: math.degrees(self.limits_rad[row, 1]),
            Parameter.WATCHDOG_PERIODS: self.watchdog_periods[row],
            Parameter.REFERENCE_PERIOD_MS: self.reference_period_s[row] * 1e3,
            Parameter.FEEDBACK_RATE_HZ: self.feedback_rate_hz[row],
            Parameter.TORQUE_LIMIT_H_NM: d.torque_limit_nm,
            Parameter.TORQUE_LIMIT_V_NM: d.torque_limit_nm,
            Parameter.FREE_PLAY_DEG: math.degrees(d.free_play_rad),
        }
        return float(table[p])

    def _write_parameter(self, row: int, p: Parameter, value: float) -> None:
        if p in (Parameter.KP_H, Parameter.KP_V):
            self.controller.kp[row, 0 if p is Parameter.KP_H else 1] = value
        elif p in (Parameter.KD_H, Parameter.KD_V):
            self.controller.kd[row, 0 if p is Parameter.KD_H else 1] = value
        elif p in (Parameter.LIMIT_H_DEG, Parameter.LIMIT_V_DEG):
            self.limits_rad[row, 0 if p is Parameter.LIMIT_H_DEG else 1] = math.radians(value)
        elif p is Parameter.WATCHDOG_PERIODS:
            self.watchdog_periods[row] = value
        elif p is Parameter.REFERENCE_PERIOD_MS:
            self.reference_period_s[row] = value / 1e3
        elif p is Parameter.FEEDBACK_RATE_HZ:
            self.feedback_rate_hz[row] = value

    def _reply_parameter(self, row: int, index: int, result: ParameterResult, value: float) -> None:
        self._send(MessageKind.PARAMETER_REPLY, row, {"Index": index, "Result": int(result), "Value": value})

    # --------------------------------------------------------------- status
    def settle(self) -> None:
        """Nothing to wait for: these modules act on a frame in ``handle_frame``."""

    def close(self) -> None:
        """Nothing to release: the modules live in this process."""

    def counters(self) -> dict:
        """JSON-able traffic counters, per module and in total."""
        return {
            "accepted_references": self.accepted_references.tolist(),
            "ignored_while_disabled": self.ignored_while_disabled.tolist(),
            "watchdog_trips": self.watchdog_trips.tolist(),
            "parameter_writes_accepted": self.parameter_writes_accepted.tolist(),
            "state": [ModuleState(int(x)).name for x in self.state],
            "last_valid_reference_s": self.last_valid_reference_s.tolist(),
            "max_reference_gap_s": self.max_reference_gap_s.tolist(),
            "min_reference_spacing_s": [None if math.isinf(x) else float(x) for x in self.min_reference_spacing_s],
            "watchdog_trip_s": [None if math.isnan(x) else float(x) for x in self.watchdog_trip_s],
            "rejected": {k: v.tolist() for k, v in self.rejected.items()},
            "rejected_total": int(sum(v.sum() for v in self.rejected.values())),
            "unknown_id_frames": self.unknown_id_frames,
            "current_limited_ticks": self.current_limited_ticks.tolist(),
            "current_limited_fraction": float(
                self.current_limited_ticks.sum() / max(1, int(self.enabled_axis_ticks[0]))
            ),
        }
