"""Compliant planar RHex (paper 003, Fig. 8): the benchmark the controllers are judged on.

Body: rigid rectangle (y, z, α). Legs: massless radial spring–dampers (k_l, d_l, rest length l) from the
hips to toe point masses m_t; a hip torque τ acts on the leg relative to the body, so the toe feels τ/L
perpendicular to the leg and the body −τ. Toe–ground: unilateral, Coulomb friction. Body–ground: penalty
normal force k_b·p + d_b·ṗ at the four corners, Coulomb friction.

Time stepping is semi-implicit Euler; Coulomb friction is applied as a clamped velocity-level impulse
(stick if the impulse needed to stop sliding is inside μ N dt, otherwise kinetic μ N dt), which is the
exact Coulomb law for the point-mass toes and a per-corner Gauss–Seidel projection for the body. `advance`
is compiled with numba; `advance.py_func` is the plain-numpy reference the tests compare against.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from .params import RHexParameters

#: Default integration step: the toe's radial damping d_l / m_t = 1e4 1/s needs dt·d_l/m_t < 2.
DEFAULT_DT_S = 2e-5
N_POS = 9  # y, z, α, toe1 (y, z), toe2 (y, z), toe3 (y, z)


def pack_parameters(p: RHexParameters) -> np.ndarray:
    return np.array(
        [
            p.half_length_m,
            p.half_height_m,
            *p.hip_offsets_m,
            p.leg_length_m,
            p.mass_kg,
            p.inertia_kgm2,
            p.toe_mass_kg,
            p.body_stiffness_N_m,
            p.body_damping_Ns_m,
            p.leg_stiffness_N_m,
            p.leg_damping_Ns_m,
            p.gravity_m_s2,
            p.mu_toe,
            p.mu_body,
        ]
    )


@numba.njit(cache=True)
def advance(pos, vel, tau, prm, dt, n_steps, toe_normal, corner_normal):
    """Integrate n_steps of dt in place. Writes the last step's toe normal forces and corner normal forces."""
    d, h = prm[0], prm[1]
    l0, m, inertia, mt = prm[5], prm[6], prm[7], prm[8]
    kb, db, kl, dl, g, mu_t, mu_b = prm[9], prm[10], prm[11], prm[12], prm[13], prm[14], prm[15]
    cx = np.array([-d, d, d, -d])
    cz = np.array([-h, -h, h, h])
    toe_f = np.zeros((3, 2))
    for _ in range(n_steps):
        y, z, a = pos[0], pos[1], pos[2]
        vy, vz, w = vel[0], vel[1], vel[2]
        ca, sa = np.cos(a), np.sin(a)
        fy, fz, mb = 0.0, -m * g, 0.0
        for i in range(3):
            di = prm[2 + i]
            hy, hz = y + di * ca, z + di * sa
            hvy, hvz = vy - di * sa * w, vz + di * ca * w
            ty, tz = pos[3 + 2 * i], pos[4 + 2 * i]
            tvy, tvz = vel[3 + 2 * i], vel[4 + 2 * i]
            ry, rz = ty - hy, tz - hz
            length = np.sqrt(ry * ry + rz * rz)
            ey, ez = ry / length, rz / length
            rate = ey * (tvy - hvy) + ez * (tvz - hvz)
            fs = -kl * (length - l0) - dl * rate
            perp = tau[i] / length
            fty = fs * ey - perp * ez
            ftz = fs * ez + perp * ey
            toe_f[i, 0] = fty
            toe_f[i, 1] = ftz - mt * g
            fy -= fty
            fz -= ftz
            mb += (hy - y) * (-ftz) - (hz - z) * (-fty) - tau[i]
        normals = np.zeros(4)
        arm_y = np.zeros(4)
        arm_z = np.zeros(4)
        for c in range(4):
            ry = cx[c] * ca - cz[c] * sa
            rz = cx[c] * sa + cz[c] * ca
            arm_y[c], arm_z[c] = ry, rz
            wz = z + rz
            if wz < 0.0:
                cvz = vz + w * ry
                nf = kb * (-wz) - db * cvz
                if nf > 0.0:
                    normals[c] = nf
                    fz += nf
                    mb += ry * nf
        vel[0] += dt * fy / m
        vel[1] += dt * fz / m
        vel[2] += dt * mb / inertia
        for i in range(3):
            vel[3 + 2 * i] += dt * toe_f[i, 0] / mt
            vel[4 + 2 * i] += dt * toe_f[i, 1] / mt
            toe_normal[i] = 0.0
            if pos[4 + 2 * i] <= 0.0 and vel[4 + 2 * i] < 0.0:
                pn = -mt * vel[4 + 2 * i]
                vel[4 + 2 * i] = 0.0
                toe_normal[i] = pn / dt
                pt = -mt * vel[3 + 2 * i]
                lim = mu_t * pn
                if pt > lim:
                    pt = lim
                elif pt < -lim:
                    pt = -lim
                vel[3 + 2 * i] += pt / mt
        # projected Gauss–Seidel on the corners' friction impulses: the *accumulated* impulse per corner is
        # clamped to the Coulomb bound, so extra sweeps refine the split between corners without exceeding it
        acc = np.zeros(4)
        for _sweep in range(4):
            for c in range(4):
                if normals[c] > 0.0:
                    vt = vel[0] - vel[2] * arm_z[c]
                    inv_m = 1.0 / m + arm_z[c] * arm_z[c] / inertia
                    lim = mu_b * normals[c] * dt
                    total = acc[c] - vt / inv_m
                    if total > lim:
                        total = lim
                    elif total < -lim:
                        total = -lim
                    p = total - acc[c]
                    acc[c] = total
                    vel[0] += p / m
                    vel[2] += -arm_z[c] * p / inertia
        for k in range(N_POS):
            pos[k] += dt * vel[k]
        for i in range(3):
            if pos[4 + 2 * i] < 0.0:
                pos[4 + 2 * i] = 0.0
        for c in range(4):
            corner_normal[c] = normals[c]


@dataclass
class CompliantState:
    """Mutable state of the compliant model."""

    pos: np.ndarray  # (9,)
    vel: np.ndarray  # (9,)
    t_s: float = 0.0
    toe_normal_N: np.ndarray | None = None
    corner_normal_N: np.ndarray | None = None

    def copy(self) -> CompliantState:
        return CompliantState(
            self.pos.copy(),
            self.vel.copy(),
            self.t_s,
            None if self.toe_normal_N is None else self.toe_normal_N.copy(),
            None if self.corner_normal_N is None else self.corner_normal_N.copy(),
        )


class CompliantRHex:
    """Model (parameters) + step function; the state is passed in and updated in place."""

    def __init__(self, params: RHexParameters, dt_s: float = DEFAULT_DT_S, compiled: bool = True):
        if not 0.0 < dt_s <= 1e-4:
            raise ValueError(f"dt_s must lie in (0, 1e-4] for the stiff toe damping, got {dt_s}")
        self.params = params
        self.dt_s = dt_s
        self._prm = pack_parameters(params)
        self._advance = advance if compiled else advance.py_func

    def hips(self, pos: np.ndarray) -> np.ndarray:
        a = pos[2]
        d = np.asarray(self.params.hip_offsets_m)
        return np.column_stack([pos[0] + d * np.cos(a), pos[1] + d * np.sin(a)])

    def toes(self, pos: np.ndarray) -> np.ndarray:
        return pos[3:9].reshape(3, 2)

    def state_from_pose(self, y: float, z: float, alpha: float, leg_dir_rad) -> CompliantState:
        """Body pose and absolute leg directions ψ_i (toe = hip + l (cos ψ, sin ψ)); zero velocity."""
        pos = np.zeros(N_POS)
        pos[:3] = y, z, alpha
        hips = self.hips(pos)
        psi = np.asarray(leg_dir_rad, float)
        toes = hips + self.params.leg_length_m * np.column_stack([np.cos(psi), np.sin(psi)])
        toes[:, 1] = np.maximum(toes[:, 1], 0.0)
        pos[3:] = toes.reshape(-1)
        return CompliantState(pos, np.zeros(N_POS), 0.0, np.zeros(3), np.zeros(4))

    def step(self, state: CompliantState, tau_Nm: np.ndarray, duration_s: float) -> None:
        n = max(1, int(round(duration_s / self.dt_s)))
        if state.toe_normal_N is None:
            state.toe_normal_N = np.zeros(3)
        if state.corner_normal_N is None:
            state.corner_normal_N = np.zeros(4)
        self._advance(
            state.pos,
            state.vel,
            np.asarray(tau_Nm, float),
            self._prm,
            self.dt_s,
            n,
            state.toe_normal_N,
            state.corner_normal_N,
        )
        state.t_s += n * self.dt_s

    def leg_geometry(self, state: CompliantState):
        """Leg lengths L_i, hip angles φ_i (relative to the body) and their rates."""
        pos, vel = state.pos, state.vel
        a, w = pos[2], vel[2]
        d = np.asarray(self.params.hip_offsets_m)
        hips = self.hips(pos)
        hip_vel = np.column_stack([vel[0] - d * np.sin(a) * w, vel[1] + d * np.cos(a) * w])
        r = self.toes(pos) - hips
        v = vel[3:9].reshape(3, 2) - hip_vel
        length = np.linalg.norm(r, axis=1)
        psi = np.arctan2(r[:, 1], r[:, 0])
        psi_rate = (r[:, 0] * v[:, 1] - r[:, 1] * v[:, 0]) / length**2
        phi = np.mod(psi - a + np.pi, 2 * np.pi) - np.pi
        return length, phi, psi_rate - w

    def system_energy_J(self, state: CompliantState) -> float:
        """Kinetic + gravitational + leg spring energy (body penalty energy excluded)."""
        p = self.params
        pos, vel = state.pos, state.vel
        kin = 0.5 * p.mass_kg * (vel[0] ** 2 + vel[1] ** 2) + 0.5 * p.inertia_kgm2 * vel[2] ** 2
        kin += 0.5 * p.toe_mass_kg * np.sum(vel[3:9] ** 2)
        pot = p.mass_kg * p.gravity_m_s2 * pos[1] + p.toe_mass_kg * p.gravity_m_s2 * np.sum(pos[4:9:2])
        length, _, _ = self.leg_geometry(state)
        spring = 0.5 * p.leg_stiffness_N_m * np.sum((length - p.leg_length_m) ** 2)
        return float(kin + pot + spring)
