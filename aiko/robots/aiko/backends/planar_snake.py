"""``[sim] model = "planar_snake"``: the planar snake among circular obstacles (paper 001) as a run backend.

The joint servos of the simulated robot track the references the control loop writes (zero-order hold); the
physics is :mod:`sim.planar_snake`. The ``[sim]`` table::

    model = "planar_snake"
    mu_ground = 0.3; mu_obstacle = 0.2; dt_s = 0.001
    joint_kp_nm_rad = 20.0; joint_kd_nms_rad = 1.0; joint_torque_limit_nm = 10.0
    head_link_angle_deg = -23.0      # θ_n at t = 0; the other links follow from the gait's initial posture
    initial_com_m = [0.0, 0.0]
    log_rate_hz = 20.0               # /sim/link_poses and /sim/contacts
    [sim.obstacles]  kind = "lattice" | "random" | "list"  (see docs/planar_snake.md)
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from aiko.core.config import Table
from aiko.core.errors import ConfigError
from aiko.core.messages import Channel, Message, integers, number, numbers
from aiko.robots.aiko.backends.sim import register_sim_model
from aiko.robots.aiko.joints import JointFeedback, JointInterface, JointReferences, JointStatus, RunContext

if TYPE_CHECKING:  # the simulator (scipy) loads when a planar-snake run or [sim] table needs it, not before
    from sim.planar_snake import PlanarSnakeModel
    from sim.planar_snake.obstacles import ObstacleField


def _pair(table: Table, key: str, default: Any) -> tuple[float, float]:
    values = table.number_list(key, default, length=2)
    return (values[0], values[1])


LINK_POSES_CHANNEL = Channel("/sim/link_poses", Message(
    "aiko.planar_snake.LinkPoses",
    "Every link of the planar snake at the log rate, link 1 (the head) first: centre and heading in the plane.",
    {
        "t_s": number("simulation time", "s"),
        "x_m": numbers("link centres, x", "m"),
        "y_m": numbers("link centres, y", "m"),
        "theta_rad": numbers("link headings from the x axis", "rad"),
        "com_m": numbers("centre of mass [x, y]", "m"),
        "com_velocity_m_s": numbers("centre-of-mass velocity [x, y]", "m/s"),
    },
))  # fmt: skip
CONTACTS_CHANNEL = Channel("/sim/contacts", Message(
    "aiko.planar_snake.Contacts",
    "The planar snake's obstacle contacts at the log rate (paper 001): which links touch which obstacle, on which "
    "side, the contact forces of the last LCP and the joint torques.",
    {
        "t_s": number("simulation time", "s"),
        "links": integers("links in contact, 1-based"),
        "side": integers("side of each contact's force (eq. 15): +1 or -1"),
        "obstacles": integers("obstacle of each contact (0-based, in the planar_snake_obstacles event's order)"),
        "lambda_n": numbers("contact forces of the last LCP (eq. 32)", "N"),
        "lambda_links": integers("link of each lambda_n entry, 1-based"),
        "joint_torque_nm": numbers("joint torques, joint 1 first", "N m"),
    },
))  # fmt: skip
MAX_OBSTACLES = 100_000  # far more than any lab floor; a lattice beyond it would exhaust the memory
MAX_RANDOM_OBSTACLES = 10_000  # rejection sampling is quadratic in the count


def parse_obstacles(table: Table, link_length_m: float) -> tuple[ObstacleField, float]:
    """``[sim.obstacles]`` → the field and the clearance required from the initial body."""
    from sim.planar_snake import PlanarSnakeError
    from sim.planar_snake.obstacles import ObstacleField, check_assumption_3, lattice_field, random_field

    kind = table.string("kind", "lattice", choices=["lattice", "random", "list", "none"])
    clearance = table.number("clearance_m", 0.002, min=0.0, max=1.0)
    try:
        if kind == "lattice":
            rows = table.number_list("rows_y_m", min=-1e4, max=1e4)
            offsets = table.number_list("row_offsets_m", [0.0] * len(rows), length=len(rows), min=-1e4, max=1e4)
            x_range = _pair(table, "x_range_m", None)
            spacing = table.number("spacing_x_m", min=0.0, min_exclusive=True, max=100.0)
            radius = table.number("radius_m", min=0.0, min_exclusive=True, max=10.0)
            per_row = (x_range[1] - x_range[0]) / spacing + 1
            if len(rows) * per_row > MAX_OBSTACLES:
                raise ConfigError(
                    f"{table.path}: {len(rows)} rows x {per_row:.0f} obstacles per row is more than "
                    f"{MAX_OBSTACLES}; widen spacing_x_m or narrow x_range_m"
                )
            field = lattice_field(x_range, rows, spacing, radius, offsets)
        elif kind == "random":
            x_range, y_range = _pair(table, "x_range_m", None), _pair(table, "y_range_m", None)
            radius_range = _pair(table, "radius_range_m", None)
            if not 0 < radius_range[0] <= radius_range[1] <= 10.0:
                raise ConfigError(f"{table.path}.radius_range_m: need 0 < low <= high <= 10 m, got {radius_range}")
            if x_range[0] > x_range[1] or y_range[0] > y_range[1]:
                raise ConfigError(f"{table.path}: x_range_m and y_range_m must be [low, high]")
            field = random_field(
                table.integer("seed", min=0, max=2**63 - 1),
                x_range,
                y_range,
                table.integer("count", min=0, max=MAX_RANDOM_OBSTACLES),
                radius_range,
                table.number("min_edge_distance_m", link_length_m * 1.0001, min=0.0, max=100.0),
            )
        elif kind == "list":
            centres = np.array(table.raw("centres_m"), dtype=float).reshape(-1, 2)
            radii = np.array(table.number_list("radii_m", min=0.0), dtype=float)
            if centres.shape[0] != radii.size:
                raise ConfigError(
                    f"{table.path}: centres_m has {centres.shape[0]} points but radii_m {radii.size} values"
                )
            if not np.isfinite(centres).all():
                raise ConfigError(f"{table.path}.centres_m: every coordinate must be finite")
            field = ObstacleField(centres, radii)
        else:
            field = ObstacleField(np.zeros((0, 2)), np.zeros(0))
    except (PlanarSnakeError, ValueError, TypeError) as exc:  # a field that cannot be built is a config error
        raise ConfigError(f"{table.path}: {exc}") from None
    table.finish()
    try:
        check_assumption_3(field, link_length_m)
    except PlanarSnakeError as exc:
        raise ConfigError(f"{table.path}: {exc}") from None
    return field, clearance


def parse_sim_table(table: Table, experiment: Any) -> dict[str, Any]:
    """Validate the ``[sim]`` table for the planar snake (key names shared with snake3d where the concept is: dt_s,
    mu_obstacle, log_rate_hz)."""
    table.string("model", "planar_snake")
    robot = experiment.robot
    if robot.has_vertical_axis:
        raise ConfigError(
            f"{table.path}.model: planar_snake needs a robot with yaw joints only; {robot.name} has cardan joints"
        )
    settings = {
        "ground_mu": table.number("mu_ground", 0.3, min=0.0, max=1.0),
        "obstacle_mu": table.number("mu_obstacle", 0.2, min=0.0, max=1.0),
        "time_step_s": table.number("dt_s", 1e-3, min=0.0, min_exclusive=True, max=0.01),
        "joint_kp_nm_rad": table.number("joint_kp_nm_rad", 20.0, min=0.0, min_exclusive=True),
        "joint_kd_nms_rad": table.number("joint_kd_nms_rad", 1.0, min=0.0, min_exclusive=True),
        "joint_torque_limit_nm": table.number("joint_torque_limit_nm", 10.0, min=0.0, min_exclusive=True),
        "head_link_angle_rad": math.radians(table.number("head_link_angle_deg", 0.0, min=-360.0, max=360.0)),
        "initial_com_m": _pair(table, "initial_com_m", [0.0, 0.0]),
        "log_rate_hz": table.number("log_rate_hz", 20.0, min=0.0, min_exclusive=True, max=1000.0),
    }
    field, clearance = parse_obstacles(table.table("obstacles", {}), robot.link_length_m)
    table.finish()
    settings["obstacles"] = field
    settings["clearance_m"] = clearance
    return settings


class PlanarSnakeBackend(JointInterface):
    """Joint interface of the simulated planar snake; integrates in ``advance_to``."""

    name = "planar_snake"

    def __init__(self) -> None:
        self._active = False
        self.model: PlanarSnakeModel | None = None

    def configure(self, ctx: RunContext) -> None:
        from sim.planar_snake import (
            PlanarSnakeError,
            PlanarSnakeModel,
            all_gaps,
            initial_state,
            joint_angles,
            state_from_joint_angles,
        )
        from sim.planar_snake.obstacles import remove_overlapping

        settings = ctx.settings("sim").model_settings
        robot = ctx.robot
        base = PlanarSnakeModel(
            n_links=robot.n_links,
            link_half_length_m=robot.link_length_m / 2,
            link_mass_kg=robot.link_mass_kg,
            link_inertia_kgm2=robot.inertia_transverse_kg_m2,
            ground_mu=settings["ground_mu"],
            obstacle_mu=settings["obstacle_mu"],
            time_step_s=settings["time_step_s"],
            joint_kp_nm_rad=settings["joint_kp_nm_rad"],
            joint_kd_nms_rad=settings["joint_kd_nms_rad"],
            joint_torque_limit_nm=settings["joint_torque_limit_nm"],
        )
        posture = ctx.gait.initial_posture().angle_h_rad if ctx.gait is not None else np.zeros(robot.n_joints)
        q0 = state_from_joint_angles(base, posture, settings["head_link_angle_rad"], settings["initial_com_m"])
        field: ObstacleField = settings["obstacles"]
        if field.count:
            gaps = all_gaps(base.with_obstacles(field.centres_m, field.radii_m), q0).min(axis=0)
            field = remove_overlapping(field, gaps, settings["clearance_m"])
        self.model = base.with_obstacles(field.centres_m, field.radii_m)
        try:
            self.state = initial_state(self.model, q0)
        except PlanarSnakeError as exc:
            raise ConfigError(f"sim: {exc}") from None
        self.obstacles = field
        self.robot = robot
        self.recorder = ctx.recorder
        self.clock = ctx.clock
        self.gait = ctx.gait
        self._refs = (joint_angles(self.model, q0), np.zeros(robot.n_joints))
        self._log_period_s = 1.0 / settings["log_rate_hz"]
        self._next_log_s = 0.0
        self._com_start = q0[-2:].copy()
        self._wall_s = 0.0
        self.recorder.event(
            "planar_snake_obstacles", self.clock.stamp_ns(0.0),
            centres_m=field.centres_m.tolist(), radii_m=field.radii_m.tolist(),
        )  # fmt: skip

    def activate(self) -> None:
        self._active = True

    def write(self, refs: JointReferences) -> None:
        if not self._active:
            return
        angle, _ = self.robot.clamp(np.asarray(refs.angle_h_rad), np.zeros(self.robot.n_joints))
        self._refs = (angle, np.asarray(refs.rate_h_rad_s, dtype=float))

    def advance_to(self, t_s: float) -> None:
        from sim.planar_snake import SimulationError, step

        model, state = self.model, self.state
        h = model.time_step_s
        start = time.perf_counter()
        while state.t_s + 0.5 * h <= t_s:
            if state.t_s + 1e-12 >= self._next_log_s:
                self._log()
                self._next_log_s += self._log_period_s
            try:
                step(model, state, *self._refs)
            except SimulationError as exc:
                self.recorder.event("sim_error", self.clock.stamp_ns(state.t_s), message=str(exc))
                raise
        self._wall_s += time.perf_counter() - start

    def _log(self) -> None:
        from sim.planar_snake import link_centres

        state = self.state
        x, y = link_centres(self.model, state.q)
        t_ns = self.clock.stamp_ns(state.t_s)
        self.recorder.record(LINK_POSES_CHANNEL, t_ns, {
            "t_s": state.t_s, "x_m": x.tolist(), "y_m": y.tolist(), "theta_rad": state.q[:-2].tolist(),
            "com_m": state.q[-2:].tolist(), "com_velocity_m_s": state.qd[-2:].tolist(),
        })  # fmt: skip
        contacts = np.flatnonzero(state.alpha)
        self.recorder.record(CONTACTS_CHANNEL, t_ns, {
            "t_s": state.t_s, "links": (contacts + 1).tolist(), "side": state.alpha[contacts].tolist(),
            "obstacles": state.contact_obstacle[contacts].tolist(), "lambda_n": state.last_lambda.tolist(),
            "lambda_links": (state.last_lambda_links + 1).tolist(),
            "joint_torque_nm": state.joint_torque_nm.tolist(),
        })  # fmt: skip

    def read(self) -> JointFeedback:
        from sim.planar_snake import joint_angles

        state, model = self.state, self.model
        if self.gait is not None and hasattr(self.gait, "observe_body_velocity"):
            # the simulator plays motion capture for gaits that watch their progress
            self.gait.observe_body_velocity(state.t_s, state.qd[-2:])
        n = model.n_links
        flags = int(JointStatus.ENABLED) if self._active else 0
        saturated = np.abs(state.joint_torque_nm) >= model.joint_torque_limit_nm * (1 - 1e-9)
        status = np.where(saturated, flags | int(JointStatus.SATURATED), flags).astype(np.uint8)
        zeros = np.zeros(n - 1)
        return JointFeedback(
            state.t_s, joint_angles(model, state.q), zeros, model.D @ state.qd[:n], zeros.copy(), status,
            effort_h=state.joint_torque_nm.copy(),
        )  # fmt: skip

    def link_poses(self) -> tuple[np.ndarray, np.ndarray]:
        from sim.planar_snake import link_centres

        x, y = link_centres(self.model, self.state.q)
        theta = self.state.q[:-2]
        positions = np.stack([x, y, np.zeros_like(x)], axis=1)
        quats = np.stack([np.cos(theta / 2), np.zeros_like(theta), np.zeros_like(theta), np.sin(theta / 2)], axis=1)
        return positions, quats

    def deactivate(self) -> None:
        self._active = False

    def summary(self) -> dict[str, Any]:
        state = self.state
        stats = state.stats.as_dict()
        com_end = state.q[-2:]
        distance = com_end - self._com_start
        out: dict[str, Any] = {
            "sim_time_s": state.t_s,
            "wall_time_s": self._wall_s,
            "realtime_factor": state.t_s / self._wall_s if self._wall_s > 0 else None,
            "com_start_m": self._com_start.tolist(),
            "com_end_m": com_end.tolist(),
            # The planar model's tracked point is its centre of mass (paper 001 reports the CM's progress).
            "tracked_point": "centre_of_mass",
            "tracked_point_start_m": [*map(float, self._com_start), 0.0],
            "tracked_point_end_m": [*map(float, com_end), 0.0],
            "distance_x_m": float(distance[0]),
            "mean_forward_speed_m_s": float(distance[0] / state.t_s) if state.t_s > 0 else 0.0,
            "obstacles": self.obstacles.count,
            **stats,
        }
        out["sim_steps"] = stats["steps"]
        if self.gait is not None and hasattr(self.gait, "statistics"):
            out.update(self.gait.statistics())
        return out


register_sim_model(
    "planar_snake",
    PlanarSnakeBackend,
    parse_sim_table,
    "planar snake among circular obstacles (paper 001, LCP contacts)",
)
