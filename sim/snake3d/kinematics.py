"""Reference kinematics in plain numpy, written to follow the paper's equations one to one.

Gap functions (eq. 9, 11–13), the generalised force directions W_N, W_T, W_V, W_J (eq. 18–43, with the eq. 24
erratum fixed: the rear contact uses r_{G_i C_{Ri}}), joint angles and rates (eq. 65–67) and the joint actuator
torques as generalised forces (eq. 62–64, sign convention below). The fast step in :mod:`sim.snake3d.fast` computes
the same quantities inside numba kernels; the tests compare the two and check every W against finite differences
of its gap function.

Ordering: contact a in 0..n-1 is the front sphere of link a, n..2n-1 the rear sphere of link a-n (eq. 10).
Velocity vector u = [v_1 (I), ω_1 (B_1), v_2, ω_2, ...] (eq. 5).
Joint actuation convention (our fix of eq. 62/68): a positive τ_h,i turns link i+1 about e_y^{B_i} relative to
link i (increasing α_h,i); a positive τ_v,i turns it about e_x^{B_{i+1}} (increasing α_v,i); the reaction acts on
link i. The PD law is then τ = K_p (α_r − α) + K_d (α̇_r − α̇).
"""

from __future__ import annotations

import math

import numpy as np

from sim.snake3d.model import SnakeModel, SnakeState
from sim.snake3d.rotations import matrix_to_quat, quat_to_matrix, rot_x, rot_y, rot_z

E_X = np.array([1.0, 0.0, 0.0])
E_Y = np.array([0.0, 1.0, 0.0])
E_Z = np.array([0.0, 0.0, 1.0])


def rotation_matrices(quat: np.ndarray) -> np.ndarray:
    return np.array([quat_to_matrix(p) for p in quat])


def sphere_offsets(model: SnakeModel, R: np.ndarray) -> np.ndarray:
    """r_{G_i S_Qi} for all contacts (2n, 3): +L_GS e_z^{B_i} (front), −L_GS e_z^{B_i} (rear)."""
    axis = R[:, :, 2]
    return np.concatenate([model.sphere_offset_m * axis, -model.sphere_offset_m * axis])


def contact_link(model: SnakeModel, a: int) -> int:
    return a % model.n_links


def gap_normal(model: SnakeModel, position: np.ndarray, quat: np.ndarray) -> np.ndarray:
    """g_N of eq. 9–10 (2n,)."""
    R = rotation_matrices(quat)
    centres = np.concatenate([position, position]) + sphere_offsets(model, R)
    return centres[:, 2] - model.link_radius_m


def gap_joint(model: SnakeModel, position: np.ndarray, quat: np.ndarray) -> np.ndarray:
    """g_J of eq. 11–13, (n−1, 4) with columns x, y, z, φ."""
    R = rotation_matrices(quat)
    half = 0.5 * model.link_length_m
    trans = position[:-1] - position[1:] + half * (R[:-1, :, 2] + R[1:, :, 2])
    phi = np.einsum("ij,ij->i", R[:-1, :, 1], R[1:, :, 0])
    return np.column_stack([trans, phi])


def contact_point_offsets(model: SnakeModel, R: np.ndarray) -> np.ndarray:
    """r_{G_i C_Qi} = r_{G_i S_Qi} − L_SC e_z^I (eq. 14, 16) for all contacts (2n, 3)."""
    return sphere_offsets(model, R) - model.link_radius_m * E_Z


def _direction_column(direction: np.ndarray, offset: np.ndarray, R: np.ndarray) -> np.ndarray:
    """[d; Rᵀ (r × d)]: the 6-vector w with wᵀ u_i = dᵀ (velocity of the body point at r), eq. 18/22."""
    return np.concatenate([direction, R.T @ np.cross(offset, direction)])


VERTICAL_AXIS_EPS = 1e-9


def plane_frame(R: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """e_x^Π, e_y^Π of eq. 27 (the link axis projected on the ground, and its horizontal normal).

    Eq. 27 is undefined for a vertical link; then the body's e_x axis (horizontal in that pose) takes its place."""
    axis = R[:, 2].copy()
    axis[2] = 0.0
    norm = np.linalg.norm(axis)
    if norm < VERTICAL_AXIS_EPS:
        axis = R[:, 0].copy()
        axis[2] = 0.0
        norm = np.linalg.norm(axis)
    ex = axis / norm
    ey = np.cross(E_Z, ex)
    return ex, ey / np.linalg.norm(ey)


def contact_directions(model: SnakeModel, position: np.ndarray, quat: np.ndarray) -> np.ndarray:
    """Per contact the four 6-vectors (N, Tx, Ty, V) acting on its link: (2n, 4, 6).

    Rolling (eq. 33–36): of the rolling velocity D^T(r_CS × ω) we keep the component along e_y^Π, i.e.
    L_SC ω·e_x^Π, the rolling of the link about its own (horizontal) axis. The other component is pitching about
    e_y^Π; with both end spheres on the ground it duplicates the moment of the two normal forces, which leaves the
    normal-force split (and with it each sphere's friction bound) undetermined: a link across a slope then
    yaws and slides where it must stick (see tests/sim/snake3d/test_contact.py)."""
    R = rotation_matrices(quat)
    offsets = contact_point_offsets(model, R)
    out = np.zeros((model.n_contacts, 4, 6))
    lsc = model.link_radius_m
    for a in range(model.n_contacts):
        Ri = R[contact_link(model, a)]
        ex, ey = plane_frame(Ri)
        out[a, 0] = _direction_column(E_Z, offsets[a], Ri)
        out[a, 1] = _direction_column(ex, offsets[a], Ri)
        out[a, 2] = _direction_column(ey, offsets[a], Ri)
        # eq. 36 projected on e_y^Π: (e_y^Π)ᵀ Dᵀ L_SC ẽ_z^I R ω_B = L_SC (e_x^Π)ᵀ R ω_B
        out[a, 3, 3:] = lsc * Ri.T @ ex
    return out


def obstacle_contacts(
    model: SnakeModel, position: np.ndarray, quat: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Link–obstacle contacts (paper ref. [29]): gaps (n·n_obs,), links, and force directions (n·n_obs, 4, 6).

    A link is the capsule of its two end spheres (centres r ± L_GS e_z^B, radius L_SC); an obstacle is a vertical
    cylinder. The gap is the horizontal distance from the obstacle axis to the capsule's axis segment minus both
    radii; the normal n points horizontally from the obstacle to the link, and the force acts at the body point of
    the link closest to the obstacle. Friction is isotropic Coulomb in the tangent plane (e_z × n, e_z); there is no
    rolling resistance (fourth direction zero)."""
    R = rotation_matrices(quat)
    obstacles = model.obstacle_array()
    n_obs = len(obstacles)
    gaps = np.zeros(model.n_links * n_obs)
    links = np.zeros(model.n_links * n_obs, dtype=int)
    dirs = np.zeros((model.n_links * n_obs, 4, 6))
    for i in range(model.n_links):
        axis = R[i, :, 2]
        horizontal = axis[:2]
        for o, (cx, cy, radius) in enumerate(obstacles):
            k = i * n_obs + o
            rel = position[i, :2] - np.array([cx, cy])
            h2 = horizontal @ horizontal
            s = 0.0 if h2 < 1e-12 else float(np.clip(-(rel @ horizontal) / (model.sphere_offset_m * h2), -1.0, 1.0))
            closest = rel + s * model.sphere_offset_m * horizontal
            distance = float(np.hypot(*closest))
            # a link axis through the post's axis has no defined normal: push along +x (deep penetration only)
            normal = np.array([closest[0] / distance, closest[1] / distance, 0.0]) if distance > 0 else E_X.copy()
            offset = s * model.sphere_offset_m * axis - model.link_radius_m * normal
            tangent = np.cross(E_Z, normal)
            gaps[k] = distance - model.link_radius_m - radius
            links[k] = i
            dirs[k, 0] = _direction_column(normal, offset, R[i])
            dirs[k, 1] = _direction_column(tangent, offset, R[i])
            dirs[k, 2] = _direction_column(E_Z, offset, R[i])
    return gaps, links, dirs


def all_contacts(model: SnakeModel, position: np.ndarray, quat: np.ndarray):
    """Ground then obstacle contacts: gaps, links, directions (·, 4, 6), friction bounds (·, 3) [μ1, μ2, μ_V]."""
    n = model.n_links
    ground_dirs = contact_directions(model, position, quat)
    ground_mu = np.tile([model.mu_longitudinal, model.mu_transversal, model.mu_rolling], (2 * n, 1))
    obs_gaps, obs_links, obs_dirs = obstacle_contacts(model, position, quat)
    obs_mu = np.tile([model.mu_obstacle, model.mu_obstacle, 0.0], (len(obs_gaps), 1))
    gaps = np.concatenate([gap_normal(model, position, quat), obs_gaps])
    links = np.concatenate([np.arange(2 * n) % n, obs_links])
    return gaps, links, np.concatenate([ground_dirs, obs_dirs]), np.concatenate([ground_mu, obs_mu])


def _place(model: SnakeModel, W: np.ndarray, column: int, link: int, w: np.ndarray) -> None:
    W[6 * link : 6 * link + 6, column] = w


def W_normal(model: SnakeModel, position: np.ndarray, quat: np.ndarray) -> np.ndarray:
    """W_N ∈ R^{6n×2n} (eq. 19–20)."""
    dirs = contact_directions(model, position, quat)
    W = np.zeros((6 * model.n_links, model.n_contacts))
    for a in range(model.n_contacts):
        _place(model, W, a, contact_link(model, a), dirs[a, 0])
    return W


def W_tangential(model: SnakeModel, position: np.ndarray, quat: np.ndarray) -> np.ndarray:
    """W_T ∈ R^{6n×4n} (eq. 30–32), columns 2a, 2a+1 along e_x^Π, e_y^Π."""
    dirs = contact_directions(model, position, quat)
    W = np.zeros((6 * model.n_links, 2 * model.n_contacts))
    for a in range(model.n_contacts):
        for k in range(2):
            _place(model, W, 2 * a + k, contact_link(model, a), dirs[a, 1 + k])
    return W


def W_rolling(model: SnakeModel, position: np.ndarray, quat: np.ndarray) -> np.ndarray:
    """W_V ∈ R^{6n×2n} (eq. 35–37 reduced to rolling about the link axis, see :func:`contact_directions`)."""
    dirs = contact_directions(model, position, quat)
    W = np.zeros((6 * model.n_links, model.n_contacts))
    for a in range(model.n_contacts):
        _place(model, W, a, contact_link(model, a), dirs[a, 3])
    return W


def W_joint(model: SnakeModel, position: np.ndarray, quat: np.ndarray) -> np.ndarray:
    """W_J ∈ R^{6n×4(n−1)} (eq. 38–43), joint i columns 4i..4i+3 = x, y, z, φ."""
    R = rotation_matrices(quat)
    n = model.n_links
    half = 0.5 * model.link_length_m
    W = np.zeros((6 * n, 4 * (n - 1)))
    for i in range(n - 1):
        zi, zj = R[i, :, 2], R[i + 1, :, 2]
        for c, e in enumerate((E_X, E_Y, E_Z)):
            W[6 * i : 6 * i + 3, 4 * i + c] = e
            W[6 * i + 3 : 6 * i + 6, 4 * i + c] = R[i].T @ np.cross(half * zi, e)
            W[6 * i + 6 : 6 * i + 9, 4 * i + c] = -e
            W[6 * i + 9 : 6 * i + 12, 4 * i + c] = R[i + 1].T @ np.cross(half * zj, e)
        a, b = R[i, :, 1], R[i + 1, :, 0]
        W[6 * i + 3 : 6 * i + 6, 4 * i + 3] = R[i].T @ np.cross(a, b)
        W[6 * i + 9 : 6 * i + 12, 4 * i + 3] = R[i + 1].T @ np.cross(b, a)
    return W


def joint_angles(quat: np.ndarray) -> np.ndarray:
    """(α_h, α_v) per joint from R^{B_i}_{B_{i+1}} = R_y(α_h) R_x(α_v), eq. 63, 65–66; (n−1, 2)."""
    R = rotation_matrices(quat)
    out = np.zeros((len(quat) - 1, 2))
    for i in range(len(quat) - 1):
        rel = R[i].T @ R[i + 1]
        out[i, 0] = -math.asin(min(1.0, max(-1.0, rel[2, 0])))
        out[i, 1] = math.atan2(rel[2, 1], rel[2, 2])
    return out


def joint_rates(quat: np.ndarray, omega_body: np.ndarray) -> np.ndarray:
    """(α̇_h, α̇_v) per joint: the relative angular velocity (eq. 67) resolved on the two joint axes.

    ω_{i+1} − ω_i = α̇_h e_y^{B_i} + α̇_v e_x^{B_{i+1}} with orthogonal axes, so the rates are exact projections
    (the paper's d_2ᵀ ω_J equals α̇_h only when α_v = 0)."""
    R = rotation_matrices(quat)
    out = np.zeros((len(quat) - 1, 2))
    for i in range(len(quat) - 1):
        rel = R[i + 1] @ omega_body[i + 1] - R[i] @ omega_body[i]
        out[i, 0] = rel @ R[i, :, 1]
        out[i, 1] = rel @ R[i + 1, :, 0]
    return out


def joint_torque_forces(quat: np.ndarray, torques_nm: np.ndarray) -> np.ndarray:
    """τ_C of eq. 64 (6n,) for joint torques (n−1, 2) [τ_h, τ_v] with the sign convention of this module."""
    R = rotation_matrices(quat)
    n = len(quat)
    tau = np.zeros(6 * n)
    for i in range(n - 1):
        T = torques_nm[i, 0] * R[i, :, 1] + torques_nm[i, 1] * R[i + 1, :, 0]
        tau[6 * i + 3 : 6 * i + 6] -= R[i].T @ T
        tau[6 * (i + 1) + 3 : 6 * (i + 1) + 6] += R[i + 1].T @ T
    return tau


def smooth_forces(model: SnakeModel, omega_body: np.ndarray) -> np.ndarray:
    """h(u) of Sec. V-A: gravity and gyroscopic terms, (6n,)."""
    g = model.gravity_vector()
    theta = np.array([model.inertia_transverse_kg_m2, model.inertia_transverse_kg_m2, model.inertia_axial_kg_m2])
    h = np.zeros(6 * model.n_links)
    for i in range(model.n_links):
        w = omega_body[i]
        h[6 * i : 6 * i + 3] = model.link_mass_kg * g
        h[6 * i + 3 : 6 * i + 6] = -np.cross(w, theta * w)
    return h


FLAT_LINK = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
"""R^I_B of a link lying flat with e_z^B along +x, e_y^B up."""


def posture_state(
    model: SnakeModel,
    joint_angles_rad: np.ndarray | None = None,
    head_direction_rad: float = 0.0,
    centre_link: int = 6,
    height_m: float = 0.0,
) -> SnakeState:
    """A state at rest in the given joint angles (n−1, 2) [α_h, α_v], the lowest sphere touching the ground
    (plus ``height_m``), the head (link 1) pointing along ``head_direction_rad`` and link ``centre_link`` (1-based)
    centred at x = y = 0. The mean direction of the body (tail → head) is aligned with the head direction."""
    n = model.n_links
    angles = np.zeros((n - 1, 2)) if joint_angles_rad is None else np.asarray(joint_angles_rad, dtype=float)
    if angles.shape != (n - 1, 2) or not np.all(np.isfinite(angles)):
        raise ValueError(f"joint_angles_rad must be a finite ({n - 1}, 2) array, got shape {angles.shape}")
    R = np.zeros((n, 3, 3))
    R[0] = FLAT_LINK
    pos = np.zeros((n, 3))
    half = 0.5 * model.link_length_m
    for i in range(n - 1):
        R[i + 1] = R[i] @ rot_y(angles[i, 0]) @ rot_x(angles[i, 1])
        pos[i + 1] = pos[i] + half * (R[i, :, 2] + R[i + 1, :, 2])
    # body runs from head (link 1) to tail along +e_z^B: the head points opposite to the chain direction
    chain = pos[-1] - pos[0]
    turn = rot_z(head_direction_rad + math.pi - math.atan2(chain[1], chain[0]))
    R = np.einsum("ij,njk->nik", turn, R)
    pos = pos @ turn.T
    centres = np.concatenate([pos, pos]) + sphere_offsets(model, R)
    pos[:, 2] += -(centres[:, 2].min() - model.link_radius_m) + height_m
    c = min(max(centre_link, 1), n) - 1
    pos[:, :2] -= pos[c, :2]
    quat = np.array([matrix_to_quat(Ri) for Ri in R])
    return SnakeState(0.0, pos, quat, np.zeros((n, 3)), np.zeros((n, 3)), np.zeros((model.n_all_contacts, 4)))


def total_energy(model: SnakeModel, state: SnakeState) -> float:
    """Kinetic plus gravitational potential energy (J), potential relative to r = 0 along the gravity vector."""
    g = model.gravity_vector()
    theta = np.array([model.inertia_transverse_kg_m2, model.inertia_transverse_kg_m2, model.inertia_axial_kg_m2])
    kinetic = 0.5 * model.link_mass_kg * np.sum(state.velocity_m_s**2) + 0.5 * np.sum(theta * state.omega_body_rad_s**2)
    potential = -model.link_mass_kg * np.sum(state.position_m @ g)
    return float(kinetic + potential)
