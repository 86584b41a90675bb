"""The ``snake3d`` simulator model of the ``sim`` backend: the 3D non-smooth Aiko model of paper 000.

``aiko run experiments/sidewinding.toml --backend sim`` runs the gait through the control loop on
:mod:`sim.snake3d`. References written by the loop (10 Hz on Aiko) are held until the next write, as the joint
controllers hold the last CAN reference; with ``[sim] reference_hold = false`` the backend instead samples the
experiment's gait itself at every simulator step (continuous references, the paper's idealisation).

Besides ``/references`` and ``/joint_feedback`` (written by the loop), the backend records, decimated to
``log_rate_hz``: ``/sim/link_poses`` (positions, quaternions wxyz), ``/sim/contacts`` (per end sphere: normal force,
friction along / across the link, rolling resistance, in N) and ``/sim/solver``; and at ``mocap_rate_hz`` (20 Hz,
Vicon's rate on the bench) ``/mocap/tracked_point``: the centre of the tracked link (6), as the Vicon logged it.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from aiko.core.config import Table
from aiko.core.errors import AikoError, ConfigError
from aiko.core.messages import WXYZ, XYZ, Channel, Message, integer, number, numbers, records, string, vectors
from aiko.robots.aiko.backends.sim import register_sim_model
from aiko.robots.aiko.description import RobotDescription
from aiko.robots.aiko.joints import JointFeedback, JointInterface, JointReferences, JointStatus, RunContext

log = logging.getLogger(__name__)
PROGRESS_INTERVAL_S = 10.0

TRACKED_POINT_CHANNEL = Channel("/mocap/tracked_point", Message(
    "aiko.snake3d.TrackedPoint",
    "The simulator's own motion capture: the tracked link's centre at the motion-capture rate.",
    {
        "t_s": number("simulation time", "s"),
        "link": integer("the tracked link, 1 = head"),
        "position_m": numbers("its centre [x, y, z], world frame", "m"),
        "source": string("snake3d"),
    },
))  # fmt: skip
LINK_POSES_CHANNEL = Channel("/sim/link_poses", Message(
    "aiko.snake3d.LinkPoses",
    "Every link's pose in the 3D simulator at the log rate, link 1 (the head) first; the link's axis is its local z.",
    {
        "t_s": number("simulation time", "s"),
        "position_m": vectors("link centres, world frame", XYZ, "m"),
        "quaternion_wxyz": vectors("link orientations (unit quaternions, link frame in the world frame)", WXYZ),
    },
))  # fmt: skip
CONTACTS_CHANNEL = Channel("/sim/contacts", Message(
    "aiko.snake3d.Contacts",
    "Contact forces of the 3D simulator at the log rate: ground contacts of every link sphere, and the obstacle "
    "posts' forces when the model has obstacles.",
    {
        "t_s": number("simulation time", "s"),
        "order": string("which sphere each ground entry is"),
        "normal_n": numbers("ground normal forces", "N"),
        "friction_along_n": numbers("ground friction along the link", "N"),
        "friction_across_n": numbers("ground friction across the link", "N"),
        "rolling_n": numbers("rolling-resistance force", "N"),
        "obstacle_forces": records("per link (1 first): the forces from each obstacle post, in the model's "
                                   "obstacle order", {
            "normal_n": numbers("normal force from each obstacle", "N"),
            "friction_horizontal_n": numbers("horizontal friction from each obstacle", "N"),
            "friction_vertical_n": numbers("vertical friction from each obstacle", "N"),
        }, optional=True),
    },
))  # fmt: skip
SOLVER_CHANNEL = Channel("/sim/solver", Message(
    "aiko.snake3d.Solver",
    "The contact solver's running statistics at the log rate.",
    {
        "t_s": number("simulation time", "s"),
        "steps": integer("time steps so far"),
        "newton_iterations_mean": number("mean Newton iterations per step so far"),
        "newton_iterations_max": integer("most Newton iterations in one step so far"),
        "retries": integer("steps retried so far"),
        "split_steps": integer("steps split into smaller ones so far"),
    },
))  # fmt: skip

if TYPE_CHECKING:  # the simulator (numba) loads when a snake3d run or [sim] table needs it, not before
    from sim.snake3d import RunStats, SnakeModel, SnakeSimulator


@dataclass(frozen=True)
class Snake3DSettings:
    model: SnakeModel
    reference_hold: bool
    log_rate_hz: float
    mocap_rate_hz: float
    tracked_link: int
    head_direction_rad: float
    start_height_m: float


def parse_settings(table: Table, robot: RobotDescription) -> Snake3DSettings:
    """Read every ``[sim]`` key of the snake3d model, ``model`` included (it may be absent: snake3d is the default)."""
    table.string("model", "snake3d", choices=("snake3d",))
    if robot.joint_type != "cardan":
        raise ConfigError(
            f"{table.source}: sim.model: snake3d needs cardan joints; {robot.name} has {robot.joint_type}"
        )
    deg = math.radians
    values = dict(
        mu_longitudinal=table.number("mu_longitudinal", 0.2, min=0.0, min_exclusive=True, max=10.0),
        mu_transversal=table.number("mu_transversal", 0.2, min=0.0, min_exclusive=True, max=10.0),
        mu_rolling=table.number("mu_rolling", 0.05, min=0.0, min_exclusive=True, max=10.0),
        dt_s=table.number("dt_s", 2.5e-4, min=0.0, min_exclusive=True, max=0.01),
        slope_rad=deg(table.number("slope_deg", 0.0, min=0.0, max=60.0)),
        slope_azimuth_rad=deg(table.number("slope_azimuth_deg", 0.0, min=-360.0, max=360.0)),
        kp_h_nm_rad=table.number("kp_h_nm_rad", 40.0, min=0.0),
        kd_h_nms_rad=table.number("kd_h_nms_rad", 0.2, min=0.0),
        kp_v_nm_rad=table.number("kp_v_nm_rad", 800.0, min=0.0),
        kd_v_nms_rad=table.number("kd_v_nms_rad", 0.2, min=0.0),
        prox_mode=table.string("prox_mode", "local", choices=("local", "paper")),
        tolerance=table.number("tolerance_ns", 1e-9, min=0.0, min_exclusive=True),
        velocity_tolerance_m_s=table.number("velocity_tolerance_m_s", 1e-7, min=0.0, min_exclusive=True),
        residual_tolerance_m_s=table.number("residual_tolerance_m_s", 1e-5, min=0.0, min_exclusive=True),
        max_iterations=table.integer("max_iterations", 1000, min=1, max=1_000_000),
        max_step_halvings=table.integer("max_step_halvings", 3, min=0, max=10),
        mu_obstacle=table.number("mu_obstacle", 0.2, min=0.0, min_exclusive=True, max=10.0),
        obstacles=_obstacles(table),
    )
    settings = dict(
        reference_hold=table.boolean("reference_hold", True),
        log_rate_hz=table.number("log_rate_hz", 20.0, min=0.0, min_exclusive=True, max=4000.0),
        mocap_rate_hz=table.number("mocap_rate_hz", 20.0, min=0.0, min_exclusive=True, max=4000.0),
        tracked_link=table.integer("tracked_link", 6, min=1, max=robot.n_links),
        head_direction_rad=deg(table.number("head_direction_deg", 0.0, min=-360.0, max=360.0)),
        start_height_m=table.number("start_height_m", 0.0, min=0.0, max=1.0),
    )
    table.finish()
    from sim.snake3d import SnakeModel, SnakeModelError

    try:
        model = SnakeModel(
            n_links=robot.n_links,
            link_length_m=robot.link_length_m,
            link_radius_m=robot.link_radius_m,
            sphere_offset_m=robot.contact_sphere_offset_m,
            link_mass_kg=robot.link_mass_kg,
            inertia_transverse_kg_m2=robot.inertia_transverse_kg_m2,
            inertia_axial_kg_m2=robot.inertia_axial_kg_m2,
            **values,
        )
    except SnakeModelError as exc:
        raise ConfigError(f"{table.source}: sim: {exc}") from None
    return Snake3DSettings(model=model, **settings)


def _obstacles(table: Table) -> tuple[tuple[float, float, float], ...]:
    """``obstacles = [[x_m, y_m, radius_m], ...]``: vertical cylinders standing on the ground."""
    raw = table.raw("obstacles", [])
    if not isinstance(raw, list):
        raise ConfigError(f"{table.source}: sim.obstacles: expected a list of [x_m, y_m, radius_m], got {raw!r}")
    posts = []
    for k, item in enumerate(raw):
        ok = isinstance(item, list) and len(item) == 3
        ok = ok and all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in item)
        if not ok or item[2] <= 0:
            raise ConfigError(
                f"{table.source}: sim.obstacles[{k}]: expected [x_m, y_m, radius_m] with radius_m > 0, got {item!r}"
            )
        posts.append((float(item[0]), float(item[1]), float(item[2])))
    return tuple(posts)


def parse_section(table: Table, experiment: Any) -> Snake3DSettings:
    return parse_settings(table, experiment.robot)


class Snake3DBackend(JointInterface):
    """The simulated Aiko: PD joint controllers (eq. 68–69) on the 3D non-smooth model."""

    name = "snake3d"

    def __init__(self) -> None:
        self.simulator: SnakeSimulator | None = None
        self._active = False
        self._started = False

    # --- lifecycle ------------------------------------------------------------------------------------------
    def configure(self, ctx: RunContext) -> None:
        self.settings: Snake3DSettings = ctx.settings("sim").model_settings
        self.robot = ctx.robot
        self.recorder = ctx.recorder
        self.clock = ctx.clock
        self.gait = ctx.gait
        if not self.settings.reference_hold and self.gait is None:
            raise ConfigError("sim.reference_hold = false needs a gait to sample; this run has none")
        model = self.settings.model
        angles = np.zeros((model.n_joints, 2))
        if self.gait is not None:
            posture = self.gait.initial_posture()
            h, v = self.robot.clamp(posture.angle_h_rad, posture.angle_v_rad)
            angles = np.column_stack([h, v])
        from sim.snake3d import SnakeSimulator, posture_state

        state = posture_state(
            model,
            angles,
            head_direction_rad=self.settings.head_direction_rad,
            centre_link=self.settings.tracked_link,
            height_m=self.settings.start_height_m,
        )
        self.simulator = SnakeSimulator(model, state)
        self.simulator.set_references(angles)  # hold the start posture until the first reference arrives
        self._next_log_s = 0.0
        self._next_mocap_s = 0.0
        self._wall_start = time.perf_counter()
        self._last_progress = self._wall_start
        self._sim_wall_s = 0.0

    def activate(self) -> None:
        self._active = True
        self._started = True

    def deactivate(self) -> None:
        """The drives go limp (zero torque); safe to call any number of times."""
        if self.simulator is not None and self._active:
            self.simulator.set_torques(np.zeros((self.simulator.model.n_joints, 2)))
        self._active = False

    def emergency_stop(self) -> None:
        self.deactivate()

    # --- commands and feedback ------------------------------------------------------------------------------
    def _sim(self) -> SnakeSimulator:
        if self.simulator is None:
            raise RuntimeError("snake3d backend used before configure()")
        return self.simulator

    def write(self, refs: JointReferences) -> None:
        if not self._active or not self.settings.reference_hold:
            return
        h, v = self.robot.clamp(refs.angle_h_rad, refs.angle_v_rad)
        self._sim().set_references(np.column_stack([h, v]), np.column_stack([refs.rate_h_rad_s, refs.rate_v_rad_s]))

    def read(self) -> JointFeedback:
        sim = self._sim()
        angle, rate = sim.joint_angles(), sim.joint_rates()
        status = np.full(sim.model.n_joints, int(JointStatus.ENABLED) if self._active else 0, dtype=np.uint8)
        torque = self._joint_torques(angle, rate)
        return JointFeedback(
            sim.state.t_s, angle[:, 0], angle[:, 1], rate[:, 0], rate[:, 1], status, torque[:, 0], torque[:, 1]
        )

    def _joint_torques(self, angle: np.ndarray, rate: np.ndarray) -> np.ndarray:
        """The joint torques (N m) the simulated controllers apply in the current state."""
        sim = self._sim()
        g = sim.gains
        tau = sim.feedforward_nm.copy()
        tau[:, 0] += g[0] * (sim.ref_angle[:, 0] - angle[:, 0]) + g[1] * (sim.ref_rate[:, 0] - rate[:, 0])
        tau[:, 1] += g[2] * (sim.ref_angle[:, 1] - angle[:, 1]) + g[3] * (sim.ref_rate[:, 1] - rate[:, 1])
        return tau

    # --- integration ----------------------------------------------------------------------------------------
    def advance_to(self, t_s: float) -> None:
        from sim.snake3d import SimulationDivergedError

        sim = self._sim()
        dt = sim.model.dt_s
        start = time.perf_counter()
        try:
            while t_s - sim.state.t_s > 0.5 * dt:
                self._record_due()
                if not self.settings.reference_hold and self._active:
                    refs = self.gait.references(sim.state.t_s)
                    h, v = self.robot.clamp(refs.angle_h_rad, refs.angle_v_rad)
                    sim.set_references(np.column_stack([h, v]), np.column_stack([refs.rate_h_rad_s, refs.rate_v_rad_s]))
                    sim.step(1)
                    continue
                until = min(t_s, self._next_log_s, self._next_mocap_s)
                steps = max(1, int(math.floor((until - sim.state.t_s) / dt + 0.5)))
                sim.step(steps)
        except SimulationDivergedError as exc:
            self.recorder.event("sim_diverged", self.clock.stamp_ns(exc.t_s), message=str(exc), links=list(exc.links))
            raise AikoError(str(exc)) from None
        finally:
            self._sim_wall_s += time.perf_counter() - start
        self._record_due()
        now = time.perf_counter()
        if now - self._last_progress > PROGRESS_INTERVAL_S:
            self._last_progress = now
            log.info("snake3d: t = %.2f s, %.2fx realtime", sim.state.t_s, sim.state.t_s / max(self._sim_wall_s, 1e-9))

    def _record_due(self) -> None:
        sim = self._sim()
        t = sim.state.t_s
        eps = 0.25 * sim.model.dt_s
        if t + eps >= self._next_mocap_s:
            point = sim.state.position_m[self.settings.tracked_link - 1]
            self.recorder.record(
                TRACKED_POINT_CHANNEL,
                self.clock.stamp_ns(t),
                {"t_s": t, "link": self.settings.tracked_link, "position_m": point.tolist(), "source": "snake3d"},
            )
            self._next_mocap_s += 1.0 / self.settings.mocap_rate_hz
        if t + eps >= self._next_log_s:
            stamp = self.clock.stamp_ns(t)
            self.recorder.record(
                LINK_POSES_CHANNEL,
                stamp,
                {
                    "t_s": t,
                    "position_m": sim.state.position_m.tolist(),
                    "quaternion_wxyz": sim.state.quaternion.tolist(),
                },
            )
            forces = sim.contact_forces_n()
            ground = forces[: sim.model.n_contacts]
            payload = {
                "t_s": t,
                "order": "front spheres of links 1..n, then rear spheres of links 1..n",
                "normal_n": ground[:, 0].tolist(),
                "friction_along_n": ground[:, 1].tolist(),
                "friction_across_n": ground[:, 2].tolist(),
                "rolling_n": ground[:, 3].tolist(),
            }
            if sim.model.obstacles:
                posts = forces[sim.model.n_contacts :].reshape(sim.model.n_links, len(sim.model.obstacles), 4)
                payload["obstacle_forces"] = [
                    {"normal_n": link[:, 0], "friction_horizontal_n": link[:, 1], "friction_vertical_n": link[:, 2]}
                    for link in posts
                ]
            self.recorder.record(CONTACTS_CHANNEL, stamp, payload)
            stats = sim.stats
            self.recorder.record(
                SOLVER_CHANNEL,
                stamp,
                {"t_s": t, "steps": stats.steps, "newton_iterations_mean": stats.newton_iterations_mean,
                 "newton_iterations_max": stats.max_sweeps, "retries": stats.retries,
                 "split_steps": stats.split_steps},
            )  # fmt: skip
            self._next_log_s += 1.0 / self.settings.log_rate_hz

    # --- read-out -------------------------------------------------------------------------------------------
    def link_poses(self) -> tuple[np.ndarray, np.ndarray]:
        sim = self._sim()
        return sim.state.position_m.copy(), sim.state.quaternion.copy()

    def summary(self) -> dict[str, Any]:
        sim = self._sim()
        return {
            **contact_solver_summary(sim.stats),
            "dt_s": sim.model.dt_s,
            "sim_wall_time_s": self._sim_wall_s,
            "realtime_factor": sim.state.t_s / self._sim_wall_s if self._sim_wall_s > 0 else None,
            "reference_hold": self.settings.reference_hold,
        }


def contact_solver_summary(stats: RunStats) -> dict[str, Any]:
    """The run summary's view of ``sim.snake3d``'s ``RunStats`` (the sim backend and the HIL plant report the same
    keys): every accepted step met the contact laws to ``contact_residual_max_m_s``; ``split_steps`` converged
    only as sub-steps."""
    return {
        "sim_steps": stats.steps,
        "newton_iterations_mean": stats.newton_iterations_mean,
        "newton_iterations_max": stats.max_sweeps,
        "newton_retries": stats.retries,
        "split_steps": stats.split_steps,
        "max_split_depth": stats.max_split_depth,
        "contact_residual_max_m_s": stats.max_residual_m_s,
    }


register_sim_model(
    "snake3d",
    Snake3DBackend,
    parse_section,
    "3D non-smooth Aiko model (Transeth et al.): cardan joints, set-valued contact and anisotropic friction",
)
