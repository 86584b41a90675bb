"""MuJoCo on the 11-link Aiko model of ``sim/snake3d`` (paper 000), driven by the same serpenoid gait.

Same model, element by element (all values read from :class:`sim.snake3d.SnakeModel`):

* n links, each a body with the link mass and the diagonal inertia (Θ1, Θ1, Θ3) about its centre, body frame as ours
  (e_z along the link towards link i+1), link centres L apart; link 1 has a free joint.
* Cardan joints: two hinges in link i+1 at its rear end (−L/2 along e_z), about e_y then e_x. MuJoCo composes
  successive hinges of a body in its local frame, so R_iᵀ R_{i+1} = R_y(α_h) R_x(α_v): exactly our eq. 63 and
  the hinge coordinates are our (α_h, α_v), their velocities our joint rates.
* Contact geometry: one capsule per link of half-length L_GS and radius L_SC, whose end caps are our two contact
  spheres, against the ground plane, through explicit ``<pair>`` elements (no link–link contacts, as ours).
  MuJoCo's plane–capsule collision (``mjc_PlaneCapsule`` in src/engine/engine_collision_primitive.c) aligns the
  contact frame's first tangent with the capsule axis, so the pair's anisotropic friction (μ_x along the link, μ_y
  across) is our ellipse C_T in the frame Π of eq. 27.
* Rolling friction about the link axis: our bound |V| ≤ μ_V N on the impulse whose moment arm is L_SC is a torque
  bound μ_V L_SC N, MuJoCo's first rolling coefficient (condim 6). MuJoCo's other two torsional/rolling coefficients
  are set to its minimum (mjMINMU = 1e-5), our model has none.
* Position servos with the paper's PD gains: a ``general`` actuator per hinge with force = ctrl − K_p q − K_d q̇ and
  ctrl = K_p α_r + K_d α̇_r, i.e. our τ = K_p (α_r − α) + K_d (α̇_r − α̇) with the reference rate included.
* Gravity, time step and initial state (positions, orientations of the gait's initial posture) from our model.

What differs by design is the contact law: MuJoCo's contacts are soft (solref/solimp) and its solver optimises a
regularised convex problem, where ours is the hard Signorini/Coulomb law solved by the prox iteration.
``cone`` chooses MuJoCo's friction cone: "pyramidal" (its default, the faster) or "elliptic".
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

import mujoco
import numpy as np

from sim.snake3d import SnakeModel, SnakeState

MJ_MIN_MU = 1e-5  # mjMINMU in include/mujoco/mjmodel.h: friction coefficients are clamped to at least this


def aiko_mjcf(model: SnakeModel, cone: str = "pyramidal", integrator: str = "Euler") -> str:
    """The MJCF text of ``model`` (see the module docstring for the element-by-element correspondence)."""
    if cone not in ("pyramidal", "elliptic"):
        raise ValueError(f"cone must be 'pyramidal' or 'elliptic', got {cone!r}")
    if model.obstacles:
        raise ValueError("the MuJoCo peer models the flat ground only (the paper runs); obstacles are not built")
    g = model.gravity_vector()
    L = model.link_length_m
    th1, th3 = model.inertia_transverse_kg_m2, model.inertia_axial_kg_m2
    roll = max(model.mu_rolling * model.link_radius_m, MJ_MIN_MU)
    friction = f"{model.mu_longitudinal} {model.mu_transversal} {MJ_MIN_MU} {roll} {MJ_MIN_MU}"
    inertial = f'<inertial pos="0 0 0" mass="{model.link_mass_kg}" diaginertia="{th1} {th1} {th3}"/>'
    capsule = f'type="capsule" size="{model.link_radius_m} {model.sphere_offset_m}" contype="0" conaffinity="0"'

    def body(i: int) -> str:
        if i == 0:
            head = '<body name="link1" pos="0 0 0"><freejoint name="root"/>'
        else:
            head = (
                f'<body name="link{i + 1}" pos="0 0 {L}">'
                f'<joint name="h{i}" type="hinge" axis="0 1 0" pos="0 0 {-L / 2}"/>'
                f'<joint name="v{i}" type="hinge" axis="1 0 0" pos="0 0 {-L / 2}"/>'
            )
        inner = body(i + 1) if i + 1 < model.n_links else ""
        return f'{head}{inertial}<geom name="g{i + 1}" {capsule}/>{inner}</body>'

    pairs = "".join(
        f'<pair geom1="ground" geom2="g{i + 1}" condim="6" friction="{friction}"/>' for i in range(model.n_links)
    )
    actuators = "".join(
        f'<general joint="{axis}{j + 1}" gainprm="1" biastype="affine" biasprm="0 {-kp} {-kd}"/>'
        for j in range(model.n_joints)
        for axis, kp, kd in (
            ("h", model.kp_h_nm_rad, model.kd_h_nms_rad),
            ("v", model.kp_v_nm_rad, model.kd_v_nms_rad),
        )
    )
    return (
        '<mujoco model="aiko">'
        f'<option timestep="{model.dt_s}" gravity="{g[0]} {g[1]} {g[2]}" cone="{cone}" integrator="{integrator}"/>'
        '<worldbody><geom name="ground" type="plane" size="0 0 1" contype="0" conaffinity="0"/>'
        f"{body(0)}</worldbody>"
        f"<contact>{pairs}</contact><actuator>{actuators}</actuator></mujoco>"
    )


@dataclass
class MujocoAiko:
    """A compiled MuJoCo model of Aiko and its data, set to a :class:`SnakeState` of our simulator."""

    model: SnakeModel
    mj_model: mujoco.MjModel
    mj_data: mujoco.MjData

    @classmethod
    def build(cls, model: SnakeModel, state: SnakeState, cone: str = "pyramidal") -> MujocoAiko:
        mj_model = mujoco.MjModel.from_xml_string(aiko_mjcf(model, cone))
        peer = cls(model, mj_model, mujoco.MjData(mj_model))
        peer.set_state(state)
        return peer

    def set_state(self, state: SnakeState) -> None:
        """Link 1's pose (free joint) and the joint angles of ``state``; velocities as given (in MuJoCo's free-joint
        convention: linear velocity in the world frame, angular velocity in the body frame, as ours)."""
        from sim.snake3d.kinematics import joint_angles, joint_rates

        d = self.mj_data
        d.qpos[:3] = state.position_m[0]
        d.qpos[3:7] = state.quaternion[0]
        d.qpos[7:] = joint_angles(state.quaternion).reshape(-1)
        d.qvel[:3] = state.velocity_m_s[0]
        d.qvel[3:6] = state.omega_body_rad_s[0]
        d.qvel[6:] = joint_rates(state.quaternion, state.omega_body_rad_s).reshape(-1)
        mujoco.mj_forward(self.mj_model, d)

    def set_references(self, angle_rad: np.ndarray, rate_rad_s: np.ndarray) -> None:
        """Hold joint references (n−1, 2) [h, v]: ctrl = K_p α_r + K_d α̇_r per hinge."""
        m = self.model
        kp = np.array([m.kp_h_nm_rad, m.kp_v_nm_rad])
        kd = np.array([m.kd_h_nms_rad, m.kd_v_nms_rad])
        self.mj_data.ctrl[:] = (kp * np.asarray(angle_rad) + kd * np.asarray(rate_rad_s)).reshape(-1)

    def step(self, n_steps: int) -> None:
        mujoco.mj_step(self.mj_model, self.mj_data, nstep=n_steps)

    def link_positions_m(self) -> np.ndarray:
        return self.mj_data.xpos[1:].copy()

    def joint_angles(self) -> np.ndarray:
        return self.mj_data.qpos[7:].reshape(-1, 2).copy()

    def total_mass_kg(self) -> float:
        return float(np.sum(self.mj_model.body_mass))


def paper_runs():
    """The module of the paper's runs (its new home under aiko.robots, or the old aiko.robots.aiko.paper_runs)."""
    try:
        return importlib.import_module("aiko.robots.aiko.paper_runs")
    except ImportError:
        return importlib.import_module("aiko.robots.aiko.paper_runs")


def run_paper_mujoco(name: str, duration_s: float, cone: str = "pyramidal", dt_s: float | None = None) -> dict:
    """One of the paper's runs on MuJoCo, with the chunking of :func:`aiko.robots.aiko.paper_runs.run_paper`
    (references held at 10 Hz); returns link 6's displacement and the wall/CPU time of the stepping."""
    import time

    from sim.snake3d import posture_state

    runs = paper_runs()
    TRACKED_LINK, paper_model = runs.TRACKED_LINK, runs.paper_model  # noqa: N806
    overrides = {} if dt_s is None else {"dt_s": dt_s}
    model, gait = paper_model(name, **overrides)
    start = gait.initial_posture()
    angles = np.column_stack([start.angle_h_rad, start.angle_v_rad])
    state = posture_state(model, angles, head_direction_rad=0.0, centre_link=TRACKED_LINK)
    peer = MujocoAiko.build(model, state, cone)
    dt = model.dt_s
    n_steps = int(round(duration_s / dt))
    ref_every = max(1, int(round(0.1 / dt)))
    p0 = peer.mj_data.xpos[TRACKED_LINK].copy()
    wall, cpu = time.perf_counter(), time.process_time()
    k = 0
    while k < n_steps:
        refs = gait.references(k * dt)
        peer.set_references(
            np.column_stack([refs.angle_h_rad, refs.angle_v_rad]),
            np.column_stack([refs.rate_h_rad_s, refs.rate_v_rad_s]),
        )
        chunk = min(ref_every, n_steps - k)
        peer.step(chunk)
        k += chunk
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    p1 = peer.mj_data.xpos[TRACKED_LINK]
    finite = bool(np.all(np.isfinite(peer.mj_data.qpos)))
    return {
        "simulator": f"mujoco {mujoco.__version__} ({cone})",
        "run": name,
        "dt_s": dt,
        "sim_time_s": n_steps * dt,
        "wall_time_s": wall,
        "cpu_time_s": cpu,
        "displacement_m": (p1[:2] - p0[:2]).tolist(),
        "finite": finite,
        "warnings": int(sum(w.number for w in peer.mj_data.warning)),
    }


if __name__ == "__main__":  # quick look: python benchmarks/peers/mujoco_aiko.py [duration_s]
    import json
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

    for run in ("sidewinding", "lateral_undulation_orthotropic", "lateral_undulation_isotropic"):
        for cone in ("pyramidal", "elliptic"):
            print(json.dumps(run_paper_mujoco(run, float(sys.argv[1]) if len(sys.argv) > 1 else 2.0, cone)))
