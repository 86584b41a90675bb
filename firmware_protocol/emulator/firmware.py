"""`FirmwareModules`: the joint modules' real firmware, running in the AVR simulator, behind the same transport.

The ELF built from `firmware_protocol/firmware/` runs unmodified on simulated ATmega128 cores (the GPL harness in
`firmware_sim/`, a separate program this package only talks to over a pipe: `harness_client`). Here is everything
on the PC side of the simulated boards: the plant and the drive model (the same `drive.drive_substep` and plants as
the Python emulator, so both kinds of module move the same robot), the encoders and potentiometers they read, the
H-bridge duty they command, and the CAN frames between the harness's bus and the transport.

Per controller period (1 ms) one exchange with the harness: the encoder positions at the period's end (predicted
from the gear's rate, off by ~0.01 deg at the drive's accelerations), the PC's frames, then the firmware runs the
period on the bus's own timing and returns the duty averaged over each physics sub-step and the frames it sent
(stamped with their end of frame); the drive and the plant then integrate the period with those voltages.

What the firmware does not implement is refused (`EmulatorConfigError`): another controller rate, heartbeat rate
or reference hold than it was built with, and answering each reference with feedback (an emulator option).
"""

from __future__ import annotations

import logging
import math
import struct
from pathlib import Path
from typing import Any

import can
import numpy as np

from firmware_protocol.dbc import ModuleState, Parameter
from firmware_protocol.emulator import fast, harness_client
from firmware_protocol.emulator.config import EmulatorConfig, EmulatorConfigError
from firmware_protocol.emulator.drive import drive_substep, new_drive_state
from firmware_protocol.emulator.harness_client import CPU_HZ, AvrHarness
from firmware_protocol.emulator.modules import Emit, plant_for
from firmware_protocol.emulator.plant import IndependentInertiaPlant, JointPlant
from firmware_protocol.emulator.rules import REJECTION_REASONS

log = logging.getLogger(__name__)

# firmware_protocol/firmware/board.h and joint_module.h: what the board is and how the firmware keeps its state
COUNTS_PER_REV = 10_000
COUNTS_PER_RAD = COUNTS_PER_REV / (2 * math.pi)
POT_SPAN_DEG = 300.0
AVCC_MV = 5000
TICK_HZ = 1000.0
HEARTBEAT_HZ = 1.0
BOOT_S = 0.01  # the modules are powered this long before the run's time 0 (they boot in ~2.5 ms)
SETTLE_TICKS = 2
EEPROM_MAGIC = b"AJ"
EEPROM_LAYOUT = 1

AXIS_FIELDS = (
    ("reference_q8", "i"), ("reference_rate_q16", "i"), ("rate_q16", "i"), ("duty", "h"), ("feedforward_q4", "i"),
    ("previous_counts", "i"), ("limit_q8", "i"), ("kp_q12", "i"), ("error_max_counts", "i"), ("kd_q12", "i"),
    ("rate_hi_max", "i"),
)  # fmt: skip
"""`jm_axis_t` (joint_module.h), packed, little-endian."""
MODULE_FIELDS = (
    ("node", "B"), ("state", "B"), ("estop", "B"), ("fault", "B"), ("watchdog", "B"), ("sequence_valid", "B"),
    ("last_sequence", "B"), ("at_limit", "B"), ("saturated", "B"), ("tick", "I"), ("last_valid_tick", "I"),
    ("watchdog_trip_tick", "I"), ("accepted_references", "I"), ("ignored_while_disabled", "I"),
    ("watchdog_trips", "I"), ("parameter_writes_accepted", "I"), ("unknown_frames", "I"),
    ("rejected", f"{len(REJECTION_REASONS)}I"), ("parameter", "12f"),
)  # fmt: skip
"""`jm_t` (joint_module.h) up to its two `jm_axis_t`, which follow: packed, little-endian; tests check the offsets
against the C."""
_AXIS_FORMAT = "".join(code for _, code in AXIS_FIELDS)
MODULE_LAYOUT = struct.Struct("<" + "".join(code for _, code in MODULE_FIELDS) + 2 * _AXIS_FORMAT)
BOARD_LAYOUT = struct.Struct("<BBBHH")  # main.c board_status_t: reset_cause, eeprom_ok, can_ok, overruns, rx_dropped
MCP_STATS_LAYOUT = struct.Struct("<HHH")  # mcp2515.h mcp_stats_t: tx_dropped, rx_overflows, bus_errors


def _unpack_module(raw: bytes) -> dict[str, Any]:
    """`jm_t` as a dict; its axes as ``out["axis"][0]`` (H) and ``[1]`` (V)."""
    values = iter(MODULE_LAYOUT.unpack_from(raw))
    out: dict[str, Any] = {}
    for name, code in MODULE_FIELDS:
        count = int(code[:-1]) if len(code) > 1 else 1
        items = [next(values) for _ in range(count)]
        out[name] = items[0] if len(code) == 1 else items
    out["axis"] = [{name: next(values) for name, _ in AXIS_FIELDS} for _ in range(2)]
    return out


def firmware_path() -> Path:
    return harness_client.DEFAULT_FIRMWARE


def check_config(config: EmulatorConfig) -> None:
    """Refuse what the firmware does not do (it never says yes to it silently)."""

    def refuse(name: str, why: str) -> None:
        raise EmulatorConfigError(f"EmulatorConfig.{name} = {getattr(config, name)!r}: {why}")

    if config.controller_rate_hz != TICK_HZ:
        refuse("controller_rate_hz", f"the firmware's controller runs at {TICK_HZ:g} Hz (board.h JM_TICK_HZ)")
    if config.heartbeat_rate_hz != HEARTBEAT_HZ:
        refuse("heartbeat_rate_hz", f"the firmware sends its heartbeat at {HEARTBEAT_HZ:g} Hz")
    if config.reference_hold != "zoh":
        refuse("reference_hold", "the firmware holds each reference (zoh) as Aiko's modules do")
    if config.reply_to_references:
        refuse("reply_to_references", "an emulator option for latency measurements; the firmware does not do it")
    g = config.gains
    if not (g.rate_filter_hz == 50.0 and g.back_emf_feedforward):
        refuse("gains", "the firmware's rate filter (50 Hz) and back-EMF feed-forward are fixed (board.h)")


def parameter_values(config: EmulatorConfig) -> list[float]:
    """Parameters 1..12 (``Parameter``) at power-up, in their wire units: the Python modules' initial values."""
    g, d = config.gains, config.drive
    return [
        g.kp_h_v_per_rad, g.kd_h_v_s_per_rad, g.kp_v_v_per_rad, g.kd_v_v_s_per_rad,
        math.degrees(config.limit_h_rad), math.degrees(config.limit_v_rad),
        config.watchdog_periods, config.reference_period_s * 1e3, config.feedback_rate_hz,
        d.torque_limit_nm, d.torque_limit_nm, math.degrees(d.free_play_rad),
    ]  # fmt: skip


def eeprom_image(node: int, config: EmulatorConfig) -> bytes:
    """The module's EEPROM (board.h): magic, layout, node id, the boot values of parameters 1..12, checksum."""
    image = bytearray(EEPROM_MAGIC + bytes([EEPROM_LAYOUT, node]) + struct.pack("<12f", *parameter_values(config)))
    image.append(-sum(image) & 0xFF)
    return bytes(image)


def pot_millivolts(angle_rad: np.ndarray) -> np.ndarray:
    """The potentiometers' wiper voltage (board.h: 0 V at -150 deg, AVCC at +150 deg), clipped to the rails."""
    fraction = (np.degrees(angle_rad) + POT_SPAN_DEG / 2) / POT_SPAN_DEG
    return np.clip(np.rint(fraction * AVCC_MV), 0, AVCC_MV).astype(np.int64)


def _nowhere(frame_id: int, data: bytes, time_s: float) -> None:
    """The ``emit`` of modules not connected to a bus."""


class FirmwareModules:
    """The joint modules' firmware on simulated ATmega128 boards, driving a plant: a `transport.ModuleSet`."""

    def __init__(
        self,
        config: EmulatorConfig | None = None,
        plant: JointPlant | None = None,
        *,
        firmware: Path | None = None,
        harness: Path | None = None,
        plant_in_harness: bool | None = None,
    ) -> None:
        """``plant_in_harness``: the harness integrates the drives and the plant itself, a whole period or more per
        request, instead of one exchange per period (the default for an `IndependentInertiaPlant`, which it has
        transcribed; other plants, or subclasses that watch their sub-steps, go through the pipe)."""
        self.config = c = config or EmulatorConfig()
        check_config(c)
        n = c.n_modules
        self.plant: JointPlant = plant_for(c, plant)
        angles, _ = self.plant.joint_state()
        self.emit: Emit = _nowhere
        self.dt_s = 1.0 / c.controller_rate_hz
        self.tick = 0
        self.drive = new_drive_state(n)
        self.drive.gear_angle_rad[...] = angles
        self.drive.brake[...] = False  # the drive model sees the average voltage; braking is a voltage of 0
        self.brake = np.ones((n, 2), bool)  # the H-bridges' brake inputs at the end of the last period
        self.effort = np.zeros((n, 2))  # the duty of the last sub-step, -1..1
        self.current_limited_ticks = np.zeros((n, 2), np.int64)
        self.enabled_axis_ticks = 0
        self.resets = np.zeros(n, np.int64)
        self._limited = np.zeros(n, np.int64)  # H-bridge flags during the last period, bits per axis
        self._runner = self._driven_runner(self.plant)
        self._pending: list[tuple[int, int, bytes]] = []
        self._closed: tuple[list, list, dict] | None = None  # the last state read, once the harness has ended
        self.frames_dropped = 0  # CAN FD frames: no classic CAN controller receives them
        self.firmware_path = Path(firmware) if firmware is not None else firmware_path()
        measurement = self._measurement()
        self.harness = AvrHarness(
            self.firmware_path,
            [eeprom_image(node, c) for node in c.node_ids],
            self._position_q8(measurement),
            pot_millivolts(measurement),
            program=harness,
        )
        self._boot_cycles = round(BOOT_S * CPU_HZ)
        self._power_up(measurement)
        if plant_in_harness is None:
            plant_in_harness = type(self.plant) is IndependentInertiaPlant
        elif plant_in_harness and type(self.plant) is not IndependentInertiaPlant:
            self.close()
            raise EmulatorConfigError("plant_in_harness: the harness has only the independent-inertia plant")
        self.plant_in_harness = plant_in_harness
        if plant_in_harness:
            self._hand_the_plant_to_the_harness()

    def _power_up(self, measurement: np.ndarray) -> None:
        """Power the modules before time 0, the plant at rest, as a lab switches the robot on before a run: a
        frame sent at time 0 finds every firmware booted and its CAN controller on the bus."""
        n = self.config.n_modules
        self.harness.step(
            self._boot_cycles, 1, self._position_q8(measurement), pot_millivolts(measurement), np.zeros(n, np.int64), []
        )
        self.harness.stats(restart=True)  # the cycle budget counts from the run, not from the boot
        boards = self.read_boards()
        silent = [self.config.node_ids[i] for i, b in enumerate(boards) if not (b["eeprom_ok"] and b["can_ok"])]
        if silent:
            self.close()
            raise EmulatorConfigError(
                f"the firmware of module(s) {silent} did not start (EEPROM or MCP2515 set-up failed): {boards}"
            )

    def _hand_the_plant_to_the_harness(self) -> None:
        c, plant = self.config, self.plant
        assert isinstance(plant, IndependentInertiaPlant)  # checked in __init__: the only plant the harness has
        prm = fast.module_parameters(c)  # the drive's constants with the Python model's own expressions
        parameters = [
            prm[fast.P_SUBSTEP_DT], prm[fast.P_HALF_FREE_PLAY], prm[fast.P_CONTACT_STIFFNESS],
            prm[fast.P_CONTACT_DAMPING], prm[fast.P_SUPPLY], prm[fast.P_RESISTANCE], prm[fast.P_BACK_EMF],
            prm[fast.P_CURRENT_LIMIT], prm[fast.P_TORQUE_PER_AMP], prm[fast.P_GEAR_VISCOUS],
            prm[fast.P_REFLECTED_INERTIA], plant.params.inertia_kg_m2, plant.params.damping_nm_s_rad,
            plant.params.limit_h_rad, plant.params.limit_v_rad,
        ]  # fmt: skip
        d = self.drive
        states = np.stack([d.gear_angle_rad, d.gear_rate_rad_s, plant.angles_rad, plant.rates_rad_s], axis=-1)
        self.harness.set_plant(parameters, c.physics_substeps, c.sensor == "joint", states)

    def _run_in_harness(self, target: int) -> None:
        """Whole periods in one request: the harness runs the cores, the bus, the drives and the plant."""
        c = self.config
        while self.tick < target:
            ticks = min(target - self.tick, 1000)  # at most a second per reply
            end_cycle = self._boot_cycles + round((self.tick + ticks) * self.dt_s * CPU_HZ)
            frames, self._pending = self._pending, []
            result = self.harness.run(end_cycle, frames)
            self._emit_frames(result.frames)
            state = result.state
            self.drive.gear_angle_rad[...] = state[:, :, 0]
            self.drive.gear_rate_rad_s[...] = state[:, :, 1]
            plant = self.plant
            assert isinstance(plant, IndependentInertiaPlant)  # plant_in_harness: checked in __init__
            plant.angles_rad[...] = state[:, :, 2]
            plant.rates_rad_s[...] = state[:, :, 3]
            self.effort = result.duty
            self.drive.voltage_v[...] = result.duty * c.drive.supply_v
            self.drive.current_limited[:, 0] = (result.limited & 1) != 0
            self.drive.current_limited[:, 1] = (result.limited & 2) != 0
            self.current_limited_ticks[...] = result.limited_periods
            self.enabled_axis_ticks = result.driven_axis_periods
            self._take_flags(result.flags)
            self.tick += ticks

    def _emit_frames(self, frames: np.ndarray) -> None:
        for record in frames:
            time_s = (int(record["cycle"]) - self._boot_cycles) / CPU_HZ
            self.emit(int(record["id"]), bytes(record["data"][: record["dlc"]]), time_s)

    def _take_flags(self, flags: np.ndarray) -> None:
        c = self.config
        self.brake[:, 0] = (flags & harness_client.FLAG_BRAKE_H) != 0
        self.brake[:, 1] = (flags & harness_client.FLAG_BRAKE_V) != 0
        for row in np.flatnonzero(flags & harness_client.FLAG_RESET):
            self.resets[row] += 1
            log.warning("module %d was reset at t=%.4f s (hardware watchdog?)", c.node_ids[row], self.time_s)
        crashed = np.flatnonzero(flags & harness_client.FLAG_CRASHED)
        if crashed.size:
            raise RuntimeError(f"the firmware of module(s) {[c.node_ids[r] for r in crashed]} stopped in the simulator")

    def _driven_runner(self, plant: JointPlant):
        """The plant's compiled period with given voltages (``run_driven_period``) and its current-limit flags; None
        for a plant without it, or one that overrides ``advance``/``joint_state`` (it must see every sub-step)."""
        runner = getattr(plant, "run_driven_period", None)
        if runner is None:
            return None
        for klass in type(plant).__mro__:
            if "run_driven_period" in vars(klass):
                break
            if "advance" in vars(klass) or "joint_state" in vars(klass):
                return None
        parameters = fast.module_parameters(self.config)
        supply = self.config.drive.supply_v
        limited = np.zeros((self.config.n_modules, 2), bool)
        return lambda duty: runner(parameters, self.drive, limited, duty, supply), limited

    # ------------------------------------------------------------------ time
    @property
    def time_s(self) -> float:
        return self.tick * self.dt_s

    def _measurement(self) -> np.ndarray:
        if self.config.sensor == "gear":
            return self.drive.gear_angle_rad
        return np.asarray(self.plant.joint_state()[0])

    def _measurement_rate(self) -> np.ndarray:
        if self.config.sensor == "gear":
            return self.drive.gear_rate_rad_s
        return np.asarray(self.plant.joint_state()[1])

    @staticmethod
    def _position_q8(angle_rad: np.ndarray) -> np.ndarray:
        return np.rint(np.asarray(angle_rad) * COUNTS_PER_RAD * 256.0).astype(np.int64)

    # ------------------------------------------------------------------ frames in
    def handle_frame(self, msg: can.Message) -> None:
        """A frame from the PC: it enters the bus at the adapter at the start of the next period."""
        if msg.is_error_frame:
            return
        if msg.is_fd:
            self.frames_dropped += 1
            return
        frame_id = msg.arbitration_id | (harness_client.ID_EXTENDED if msg.is_extended_id else 0)
        frame_id |= harness_client.ID_REMOTE if msg.is_remote_frame else 0
        self._pending.append((frame_id, msg.dlc, bytes(msg.data)))

    # ------------------------------------------------------------------ periods
    def run_ticks(self, target: int) -> None:
        if self.plant_in_harness:
            self._run_in_harness(target)
            return
        while self.tick < target:
            self._run_period()

    def _run_period(self) -> None:
        c = self.config
        substeps = c.physics_substeps
        end_cycle = self._boot_cycles + round((self.tick + 1) * self.dt_s * CPU_HZ)
        measurement = self._measurement()
        predicted = measurement + self._measurement_rate() * self.dt_s
        frames, self._pending = self._pending, []
        result = self.harness.step(
            end_cycle, substeps, self._position_q8(predicted), pot_millivolts(measurement), self._limited, frames
        )
        self._emit_frames(result.frames)
        self._take_flags(result.flags)
        self.effort = result.duty[:, -1, :]
        if self._runner is not None:
            run, limited_out = self._runner
            run(np.ascontiguousarray(result.duty))
            limited = limited_out.copy()
        else:
            sub_dt = self.dt_s / substeps
            limited = np.zeros((c.n_modules, 2), bool)
            for s in range(substeps):
                self.drive.voltage_v[...] = result.duty[:, s, :] * c.drive.supply_v
                angles, rates = self.plant.joint_state()
                torques = drive_substep(c.drive, self.drive, angles, rates, sub_dt)
                limited |= self.drive.current_limited
                self.plant.advance(torques, sub_dt)
        driven = ~self.brake
        self.current_limited_ticks += limited & driven
        self.enabled_axis_ticks += int(driven.sum())
        self._limited = limited[:, 0].astype(np.int64) | (limited[:, 1].astype(np.int64) << 1)
        self.tick += 1

    # ------------------------------------------------------------------ the firmware's own view
    def read_modules(self) -> list[dict[str, Any]]:
        """Each module's state as the firmware holds it (read from its RAM, as a debugger would)."""
        if self._closed is not None:
            return self._closed[0]
        s = self.harness.symbols
        return [
            _unpack_module(self.harness.peek(i, s.module_address, MODULE_LAYOUT.size))
            for i in range(self.config.n_modules)
        ]

    def read_boards(self) -> list[dict[str, int]]:
        if self._closed is not None:
            return self._closed[1]
        s = self.harness.symbols
        out = []
        for i in range(self.config.n_modules):
            cause, eeprom_ok, can_ok, overruns, rx_dropped = BOARD_LAYOUT.unpack(
                self.harness.peek(i, s.board_address, BOARD_LAYOUT.size)
            )
            tx_dropped, rx_overflows, bus_errors = MCP_STATS_LAYOUT.unpack(
                self.harness.peek(i, s.mcp_stats_address, MCP_STATS_LAYOUT.size)
            )
            out.append({
                "reset_cause": cause, "eeprom_ok": eeprom_ok, "can_ok": can_ok, "tick_overruns": overruns,
                "rx_dropped": rx_dropped, "tx_dropped": tx_dropped, "rx_overflows": rx_overflows,
                "bus_errors": bus_errors,
            })  # fmt: skip
        return out

    @property
    def state(self) -> np.ndarray:
        return np.array([m["state"] for m in self.read_modules()])

    def parameter(self, parameter: Parameter) -> np.ndarray:
        """Every module's value of one parameter, as the firmware holds it (float32)."""
        return np.array([m["parameter"][int(parameter) - 1] for m in self.read_modules()])

    def reference_rad(self) -> np.ndarray:
        axes = [[a["reference_q8"] for a in m["axis"]] for m in self.read_modules()]
        return np.array(axes) / 256.0 / COUNTS_PER_RAD

    def counters(self) -> dict[str, Any]:
        """The emulator's counters where the firmware keeps the same (its own RAM), and the harness's view."""
        modules = self.read_modules()
        boards = self.read_boards()
        stats = self._closed[2] if self._closed is not None else self.harness.stats()
        out = {
            "accepted_references": [m["accepted_references"] for m in modules],
            "ignored_while_disabled": [m["ignored_while_disabled"] for m in modules],
            "watchdog_trips": [m["watchdog_trips"] for m in modules],
            "parameter_writes_accepted": [m["parameter_writes_accepted"] for m in modules],
            "state": [ModuleState(m["state"]).name for m in modules],
            # the firmware counts its own ticks from power-up; times are its uptime, not the run's clock
            "last_valid_reference_s": [m["last_valid_tick"] / TICK_HZ for m in modules],
            "watchdog_trip_s": [m["watchdog_trip_tick"] / TICK_HZ if m["watchdog_trips"] else None for m in modules],
            "rejected": {reason: [m["rejected"][i] for m in modules] for i, reason in enumerate(REJECTION_REASONS)},
            "rejected_total": sum(sum(m["rejected"]) for m in modules),
            "unknown_id_frames": sum(m["unknown_frames"] for m in modules),
            "current_limited_ticks": self.current_limited_ticks.tolist(),
            "current_limited_fraction": float(self.current_limited_ticks.sum() / max(1, self.enabled_axis_ticks)),
        }
        total = [m["total_cycles"] for m in stats["modules"]]
        out["firmware"] = {
            "elf": str(self.firmware_path),
            "boards": boards,
            "resets": self.resets.tolist(),
            "awake_fraction": [m["awake_cycles"] / max(1, t) for m, t in zip(stats["modules"], total, strict=True)],
            "max_awake_cycles_per_ms": [m["max_awake_cycles_per_ms"] for m in stats["modules"]],
            "encoder_edges": [m["encoder_edges"] for m in stats["modules"]],
            "bus_frames": stats["bus_frames"],
            "bus_load": stats["bus_busy_cycles"] / max(1, max(total)),  # since time 0
            "arbitration_losses": stats["arbitration_losses"],
            "fd_frames_dropped": self.frames_dropped,
        }
        return out

    def settle(self) -> None:
        """Run 2 ms: the PC's frames reach the bus at the next period, take up to 0.13 ms each and are handled by
        the receive interrupt and the main loop within tens of microseconds."""
        self.run_ticks(self.tick + SETTLE_TICKS)

    def close(self) -> None:
        """End the harness; what the firmware held then stays readable (`read_modules`, `counters`)."""
        if self._closed is None:
            try:
                self._closed = (self.read_modules(), self.read_boards(), self.harness.stats())
            except harness_client.HarnessError as exc:  # the harness is gone already: nothing left to read
                log.warning("the firmware's last state could not be read: %s", exc)
                raise
            finally:
                self.harness.close()
