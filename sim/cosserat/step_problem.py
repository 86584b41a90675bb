"""The nonlinear system of one implicit-Euler step of the PLS Cosserat rod with smoothed frictional contact (paper
004, eq. 55, 60): its residual and quasi-Newton matrix (`StepProblem`, the readable reference step), its warm
start, and what a converged step reports (`StepInfo`).

Unknowns of one step: q̇_k (the free generalized velocities) and the contact slacks u = [u_n, u_t1, u_t2] at
each contact node. With q_k = q_{k−1} + h q̇_k, the residual is

  M(q_k)(q̇_k − q̇_{k−1}) + h C(q_k, q̇_k) q̇_k + h (K θ_k + D θ̇_k) − h (P(q_k) + Σ_j J_c,jᵀ F_j) = 0
  δ_n,j(q_k)/σ_δ − f*(u_n,j) = 0,        v_t,j(q_k, q̇_k)/σ_v − W*(u_t,j) u_t,j = 0

with F_j = σ_λ (n f(u_n) + [t1 t2] W(u_t) u_t). The inertial term is evaluated as ∫Jᵀ[ℳ(J Δq̇ + h J̇q̇) −
h ad_ηᵀℳη] dX, where J̇q̇ comes exactly from one complex-step sweep at q_k + iεq̇_k (no C matrix is formed).

Newton uses the analytic Jacobian of every term except the configuration dependence of M, C and of the
contact/gravity/point-load geometry (i.e. it keeps M + hD + h²K and the exact contact blocks in q̇ and u);
the dropped terms are O(h·|Δq̇|, h·|q̇|, h²·|P|), so the iteration converges fast at the time steps used here.
The trigonometric smoothing is iterated in the regular (Heaviside) slack coordinates y = φ(u) and mapped back
(`NewtonSettings.regular_slack_coordinates`, `slack.regular_slack`): both maps are exact, so this is the same
step, without the trigonometric map's vanishing slack columns at the corners of the complementarity graphs.

Point constraints (sim.cosserat.constraints) add their multipliers λ as unknowns: the momentum rows get
−h Q_c(q_k, λ) (so hλ is the step's constraint impulse) and the rows g(q_k)/σ_g = 0 hold the constraint at
the end of every step (position level: no drift). Newton keeps the exact blocks ∂g/∂q̇ = h G and
∂Q_c/∂λ and drops ∂Q_c/∂q (O(h²λ), like the other geometry terms).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from sim.cosserat._slack_kernels import contact_laws, smoothing_arguments
from sim.cosserat.constraints import (
    constraint_force,
    constraint_force_map,
    constraint_jacobian,
    constraint_residual,
    multiplier_scales,
    n_constraint_rows,
    row_scales,
)
from sim.cosserat.contact import (
    contact_generalized_force_and_slip,
    contact_query,
    contact_scales,
    fill_contact_blocks,
)
from sim.cosserat.forces import (
    Kinematics,
    elastic_force,
    inertia_and_gravity,
    inertia_minus_gravity,
    kinematics,
    kinematics_with_rates,
    mass_matrix,
    mass_matrix_reference,
    point_load_force,
)
from sim.cosserat.model import RodModel, RodState
from sim.cosserat.obstacles import Plane
from sim.cosserat.slack import Smoothing, friction_map, normal_map


@dataclass
class StepInfo:
    """What one step produced besides the new state."""

    iterations: int
    residual: float
    used_fallback: bool
    base_wrench: np.ndarray  # (6,) [moment; force] applied by the base support on the rod, world frame
    contact_force_n: np.ndarray  # (k,3) world nodal contact forces on the rod
    contact_gap_m: np.ndarray  # (k,)
    contact_slip_m_s: np.ndarray  # (k,2)
    substeps: int = 1  # the steps dt was split into by halving (`step`)
    # 1: solved directly; more: the converged stages of the continuation rescue (`step`)
    continuation_stages: int = 1
    # point-constraint reactions on the rod: world force (N) per constraint, then section-frame moment (N·m)
    # for "fixed" ones (model.constraints order)
    constraint_multipliers: np.ndarray = field(default_factory=lambda: np.zeros(0))
    # the compiled step's work (0 on the reference step): rebuilds of the Newton matrix's factors, residual evaluations
    matrix_refreshes: int = 0
    residual_evaluations: int = 0


@dataclass(frozen=True)
class NewtonIterate:
    """One Newton iterate of a step, for `step(..., on_newton_iterate=...)` (paper 004, Fig. 16: the contact
    load during the iterations). iteration 0 is the warm start; t_s and dt_s are those of the (sub)step."""

    t_s: float
    dt_s: float
    iteration: int
    residual: float
    contact_force_n: np.ndarray  # (k,3) world nodal contact forces at this iterate


class StepProblem:
    """The nonlinear system of one implicit-Euler step, as residual and (quasi-Newton) Jacobian of x."""

    def __init__(
        self,
        model: RodModel,
        state: RodState,
        dt_s: float,
        base_alpha_next: np.ndarray | None,
        law: Smoothing | None = None,
        scale_dt_s: float | None = None,
    ):
        """`law` replaces the model's smoothing in the contact laws (the regular-coordinate solve of an exact
        smoothing iterates on the Heaviside maps; see `step`). `scale_dt_s` (default dt_s) is the time step the
        inertial slack scales σ_δ, σ_v are computed for: the stages of a continued step (`step`) keep the
        scenario's dt there, so the smoothed contact law is one function of the physical gap and force whatever
        length of step the solver happens to solve."""
        self.model, self.h = model, dt_s
        self.smoothing = law if law is not None else (model.contact.smoothing if model.contact else None)
        self.q_prev, self.v_prev = state.q, state.v
        self.free = model.free_dofs
        self.v_fixed = np.zeros(model.n_dof)
        if model.base == "clamped" and base_alpha_next is not None:
            self.v_fixed[0:6] = (np.asarray(base_alpha_next, float) - state.q[0:6]) / dt_s
        self.n_free = len(self.free)
        self.k = model.n_contact_nodes
        self.n_c = n_constraint_rows(model.constraints)
        self.scales = contact_scales(model, scale_dt_s or dt_s) if model.contact is not None else None
        g_norm = float(np.linalg.norm(model.gravity_m_s2))
        # Reference speed of the dynamic rows' tolerance. It includes the prescribed base velocity: without it
        # a rod at rest without gravity (the tube insertion's first step) got v_ref = 1e-6·L/h and row scales
        # ~1e21 (rcond 1e-14 even with the friction bound fixed).
        self.v_ref = max(
            g_norm * dt_s,
            float(np.max(np.abs(state.v))),
            float(np.max(np.abs(self.v_fixed))),
            1e-6 * model.rod.length_m / dt_s,
        )
        if self.n_c:
            # multipliers in units of the rod's weight (moments × L); constraint rows in units of the step's
            # reference displacement v_ref·h (rotations / L), so the Newton tolerance 1e-8 holds g to 1e-8·v_ref·h
            g_ref = max(g_norm, 1.0)
            self.multiplier_scale = multiplier_scales(
                model.constraints, model.rod.mass_kg() * g_ref, model.rod.length_m
            )
            self.constraint_row_scale = row_scales(model.constraints, model.rod.length_m) * (
                model.rod.length_m / (self.v_ref * dt_s)
            )
        self._matrix = None
        self._elastic_block: np.ndarray | None = None
        self._all_free = False
        self.frame_terms = False  # NewtonSettings.contact_frame_terms
        self._row_scale = None
        self._kin_cache: tuple[bytes, Kinematics] | None = None
        self._eval_cache: tuple[bytes, tuple] | None = None
        self._tip_load = bool(np.any(model.tip_force_n != 0) or np.any(model.tip_moment_n_m != 0))
        # True: the complex sweep of the full J̇, the plain inertia kernel, the numpy contact laws and the plain
        # mass matrix (the reference path the tests compare the fast one with)
        self.reference_kinematics = False

    def kinematics_at(self, v: np.ndarray) -> Kinematics:
        """Kinematics at q_prev + h v with J̇ v (complex step), cached (the warm-start prediction, the first
        Newton evaluation and the step's outputs all need the same sweep)."""
        key = v.tobytes()
        if self._kin_cache is None or self._kin_cache[0] != key:
            sweep = kinematics if self.reference_kinematics else kinematics_with_rates
            self._kin_cache = (key, sweep(self.model, self.q_prev + self.h * v, v))
        return self._kin_cache[1]

    def unpack(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        v = self.v_fixed.copy()
        v[self.free] = x[: self.n_free]
        return v, x[self.n_free : self.n_free + 3 * self.k].reshape(-1, 3)

    def multipliers(self, x: np.ndarray) -> np.ndarray:
        """Constraint reactions (N, N·m) from the scaled unknowns at the end of x."""
        return x[self.n_free + 3 * self.k :] * self.multiplier_scale if self.n_c else np.zeros(0)

    def pack(self, v: np.ndarray, slack: np.ndarray, multipliers: np.ndarray | None = None) -> np.ndarray:
        z = np.zeros(self.n_c) if multipliers is None else multipliers / self.multiplier_scale
        return np.concatenate([v[self.free], slack.reshape(-1), z])

    def _iteration_matrix(self, kin: Kinematics) -> np.ndarray:
        """M(q) + hD + h²K on the free dofs at the current iterate.

        M is re-assembled at every iterate (composite inertias, `mass_matrix`): at an impact the warm start can be
        far from the solution in the strain rates (h·Δθ̇ of order one), and an M frozen there made the
        iteration stall. The row scale is fixed at the first iterate so the merit function stays the same
        throughout the step."""
        m = self.model
        if self._matrix is not None and self._matrix[0] is kin:  # the first iterate: row scale, then matrix
            return self._matrix[1]
        if self._elastic_block is None:  # hD + h²K: constant over the step, formed once
            self._elastic_block = self.h * m.damping + self.h**2 * m.stiffness
            self._all_free = len(self.free) == m.n_dof and bool(np.all(self.free == np.arange(m.n_dof)))
        A = (mass_matrix_reference if self.reference_kinematics else mass_matrix)(m, kin)
        A[6:, 6:] += self._elastic_block
        if not self._all_free:
            A = A[np.ix_(self.free, self.free)]
        if self._row_scale is None:
            self._row_scale = 1.0 / (np.diag(A) * self.v_ref)
        self._matrix = (kin, A)
        return A

    def generalized_residual(
        self, v: np.ndarray, slack: np.ndarray, kin: Kinematics | None = None, multipliers: np.ndarray | None = None
    ):
        """Unscaled dynamic residual on all dofs, the contact residuals and the pieces the Jacobian needs."""
        m, h = self.model, self.h
        q = self.q_prev + h * v
        if kin is None:
            kin = self.kinematics_at(v)
        g = m.grid
        if kin.Jdot is None:
            r_dyn = inertia_minus_gravity(
                kin.J,
                kin.eta,
                kin.eta_dot,
                kin.R,
                v - self.v_prev,
                h,
                m.quad_inertia,
                g.quad_weight_m,
                g.quad_index,
                m.gravity_m_s2,
                g.section_of_point,
            )
            r_dyn += h * elastic_force(m, q, v)
            if self._tip_load:
                r_dyn -= h * point_load_force(m, kin)
        else:
            q_in, q_grav = inertia_and_gravity(
                kin.J,
                kin.Jdot,
                kin.R,
                v,
                v - self.v_prev,
                h,
                m.quad_inertia,
                g.quad_weight_m,
                g.quad_index,
                m.gravity_m_s2,
            )
            r_dyn = q_in + h * (elastic_force(m, q, v) - q_grav - point_load_force(m, kin))
        contact = None
        if m.contact is not None:
            contact = self._contact(kin, v, slack)
            r_dyn -= h * contact["generalized_force"]
        if self.n_c and multipliers is not None:
            r_dyn -= h * constraint_force(m.constraints, m.constraint_index, kin.R, kin.J, multipliers)
        return r_dyn, contact, kin

    def _contact(self, kin: Kinematics, v: np.ndarray, slack: np.ndarray) -> dict:
        """Contact forces, gap and slip residuals and the per-node derivatives the Newton matrix needs (the
        laws in one numba kernel, `contact_laws`; `_contact_reference` is the plain-numpy version)."""
        if self.reference_kinematics:
            return self._contact_reference(kin, v, slack)
        m, sc = self.model, self.scales
        cq = contact_query(m, kin)
        kind, sharpness, eps = smoothing_arguments(self.smoothing)
        laws = contact_laws(
            kind, sharpness, eps, m.contact.friction_coefficient, sc.force_n, slack, cq.normal, cq.t1, cq.t2
        )
        result = self._contact_result(cq, laws.force, v, laws.gap_map, laws.slip_map)
        result.update(laws._asdict())
        return result

    def _contact_reference(self, kin: Kinematics, v: np.ndarray, slack: np.ndarray) -> dict:
        """Plain-numpy contact laws (`slack.normal_map`, `slack.friction_map`): the reference of `_contact`."""
        m, sc = self.model, self.scales
        mu = m.contact.friction_coefficient
        cq = contact_query(m, kin)
        u_n, u_t = slack[:, 0], slack[:, 1:3]
        lam_n, dlam_n, gap_map, dgap_map = normal_map(self.smoothing, u_n)
        # Friction bound a = μ·max(Λ_n, 0): the sigmoid's Λ_n = u_n·D(u_n) is slightly *negative* at separated
        # nodes, and a negative bound turns the friction map into an anti-friction gain −a/|u_t| ≈ −a/ε
        # (ε = 1e-9) at u_t = 0: entries ~1e6 in the Newton matrix, rcond ≈ 1e-22 in the tube scenario.
        in_contact = lam_n > 0.0
        bound = mu * np.where(in_contact, lam_n, 0.0)
        dbound_dun = mu * np.where(in_contact, dlam_n, 0.0)
        lam_t, dlt_du, dlt_da, slip_map, dslip_du, dslip_da = friction_map(self.smoothing, u_t, bound)
        force = sc.force_n * (lam_n[:, None] * cq.normal + lam_t[:, 0:1] * cq.t1 + lam_t[:, 1:2] * cq.t2)
        result = self._contact_result(cq, force, v, gap_map, slip_map)
        result.update(
            lam_n=lam_n, dlam_n=dlam_n, dbound_dun=dbound_dun, lam_t=lam_t, dgap_map=dgap_map, dlt_du=dlt_du,
            dlt_da=dlt_da, dslip_du=dslip_du, dslip_da=dslip_da,
        )  # fmt: skip
        return result

    def _contact_result(self, cq, force: np.ndarray, v: np.ndarray, gap_map: np.ndarray, slip_map: np.ndarray) -> dict:
        """The part of a contact evaluation both law paths share: generalized force, slip and the gap and slip
        residual rows (gap / σ_δ − f*(u_n), v_t / σ_v − W*(u_t)u_t)."""
        sc = self.scales
        basis_t = np.stack([cq.t1, cq.t2], axis=1)  # (k,2,3)
        gen_force, slip = contact_generalized_force_and_slip(cq.jac_contact, force, basis_t, v)
        return {
            "query": cq,
            "force": force,
            "generalized_force": gen_force,
            "slip": slip,
            "r_gap": cq.gap_m / sc.gap_m - gap_map,
            "r_slip": slip / sc.slip_m_s - slip_map,
            "basis_t": basis_t,
        }

    def evaluate(self, x: np.ndarray) -> tuple:
        """(r_dyn, contact, kin) at x, cached for the last x."""
        key = x.tobytes()
        if self._eval_cache is None or self._eval_cache[0] != key:
            v, slack = self.unpack(x)
            self._eval_cache = (key, self.generalized_residual(v, slack, multipliers=self.multipliers(x)))
        return self._eval_cache[1]

    def residual_and_jacobian(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.residual(x), self.jacobian(x)

    def residual_and_lazy_jacobian(self, x: np.ndarray) -> tuple[np.ndarray, Callable[[], np.ndarray]]:
        """The scaled residual now and its (quasi-Newton) Jacobian on demand: the Newton solver only needs
        the matrix at accepted iterates, not at the rejected trial points of the line search."""
        return self.residual(x), lambda: self.jacobian(x)

    def residual(self, x: np.ndarray) -> np.ndarray:
        r_dyn, contact, kin = self.evaluate(x)
        if self._row_scale is None:
            self._iteration_matrix(kin)
        parts = [r_dyn[self.free] * self._row_scale]
        if contact is not None:
            parts.append(np.column_stack([contact["r_gap"], contact["r_slip"]]).reshape(-1))
        if self.n_c:
            m = self.model
            g = constraint_residual(m.constraints, m.constraint_index, kin.R, kin.p)
            parts.append(g * self.constraint_row_scale)
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def error_norm(self, x: np.ndarray, r: np.ndarray) -> float:
        """What must meet the Newton tolerance: ‖r‖∞, with the dynamic rows measured against the larger of v_ref
        and the iterate's own largest speed. The row scale is fixed at the first iterate from v_ref, the speeds
        before the step; where the step itself is far faster (the IX-C release: v_ref 6e-3, the released end's
        strain rates 6e4), a plain 1e-8 asks for velocities to 1e-15 of their size, below the rounding of the
        residual (measured: one-ulp changes of x moved it by 6e-7), so whether Newton "converged" was decided
        by the BLAS kernel. Relative to the solution's own speed the tolerance keeps its meaning everywhere."""
        nf = self.n_free
        speed_ratio = max(1.0, float(np.max(np.abs(x[:nf]))) / self.v_ref) if nf else 1.0
        dynamic = float(np.max(np.abs(r[:nf]))) / speed_ratio if nf else 0.0
        others = float(np.max(np.abs(r[nf:]))) if len(r) > nf else 0.0
        return max(dynamic, others)

    def _add_constraint_blocks(self, jac: np.ndarray, kin: Kinematics) -> None:
        """∂(momentum rows)/∂λ = −h Q_c-map and ∂(g rows)/∂q̇ = h G (both scaled)."""
        m, nf, h = self.model, self.n_free, self.h
        rows = slice(nf + 3 * self.k, nf + 3 * self.k + self.n_c)
        fmap = constraint_force_map(m.constraints, m.constraint_index, kin.R, kin.J)[self.free]
        jac[:nf, rows] = -h * self._row_scale[:, None] * fmap * self.multiplier_scale[None, :]
        G = constraint_jacobian(m.constraints, m.constraint_index, kin.R, kin.J)[:, self.free]
        jac[rows, :nf] = h * self.constraint_row_scale[:, None] * G

    def _matrix_without_contact(self, x: np.ndarray) -> tuple[np.ndarray, dict | None, Kinematics]:
        """The Newton matrix's dynamics and constraint blocks (shared by the fast and the reference assembly)."""
        r_dyn, contact, kin = self.evaluate(x)
        nf = self.n_free
        size = nf + 3 * self.k + self.n_c
        jac = np.zeros((size, size))
        jac[:nf, :nf] = self._iteration_matrix(kin) * self._row_scale[:, None]
        if self.n_c:
            self._add_constraint_blocks(jac, kin)
        return jac, contact, kin

    def jacobian(self, x: np.ndarray) -> np.ndarray:
        """Newton matrix: exact contact blocks, M(q) + hD + h²K for the dynamics (see module docstring)."""
        jac, contact, kin = self._matrix_without_contact(x)
        if contact is None:
            return jac
        s = self._row_scale
        sc = self.scales
        cq = contact["query"]
        bt = contact["basis_t"]
        if "df_dun" in contact:  # from the contact-law kernel
            df_dun, df_dut = contact["df_dun"], contact["df_dut"]
        else:
            dlt_dun = contact["dlt_da"] * contact["dbound_dun"][:, None]
            df_dun = sc.force_n * (
                contact["dlam_n"][:, None] * cq.normal + dlt_dun[:, 0:1] * cq.t1 + dlt_dun[:, 1:2] * cq.t2
            )
            df_dut = sc.force_n * np.einsum("kai,kab->kib", bt, contact["dlt_du"])  # (k,3,2)
        fill_contact_blocks(
            jac,
            self.free,
            cq.jac_contact,
            cq.jac_position,
            cq.normal,
            bt,
            df_dun,
            df_dut,
            s,
            self.h,
            sc.gap_m,
            sc.slip_m_s,
            contact["dgap_map"],
            contact["dslip_da"] * contact["dbound_dun"][:, None],
            contact["dslip_du"],
        )
        if self.frame_terms and any(not isinstance(ob, Plane) for ob in self.model.contact.obstacles):
            self._add_frame_rotation_terms(jac, contact, kin, self.unpack(x)[0])
        return jac

    def exact_jacobian(self, x: np.ndarray, r: np.ndarray | None = None) -> np.ndarray:
        """The Newton matrix with its velocity columns replaced by forward differences of the scaled residual
        (`r` = residual(x) if known): adds all the quasi-Newton matrix omits — h·∂(Cq̇)/∂q̇, h·∂M/∂q·Δq̇, the
        geometric stiffness of gravity, contact and constraint forces, the turning of J_c in the slip rows.
        The slack and multiplier columns are exact already and stay analytic (a difference across the friction
        map's ε = 1e-9 corner at u_t = 0 would be wrong there). Costs n_free residual evaluations: the rescue
        of a step that failed with halvings only (`dynamics.step`)."""
        jac = self.jacobian(x).copy()
        # Central differences with the step scaled to the iterate's largest speed: the residual's rounding is
        # relative to its largest terms, so a step relative to |x_j| alone (1.5e-8 for a velocity near 0 beside
        # strain rates of 1e4) made columns of noise (measured: the released IX-C rod, where the matrix's
        # condition is ~1e8, then stalled on some BLAS kernels and not others). eps^(1/3) balances truncation
        # and rounding of a central difference.
        speed = float(np.max(np.abs(x[: self.n_free]))) if self.n_free else 1.0
        for j in range(self.n_free):
            delta = 6e-6 * max(abs(float(x[j])), 1e-3 * speed, 1e-6)
            shifted = x.copy()
            shifted[j] += delta
            plus = self.residual(shifted)
            shifted[j] -= 2.0 * delta
            jac[:, j] = (plus - self.residual(shifted)) / (2.0 * delta)
        return jac

    def _obstacle_frame_derivatives(self, kin: Kinematics):
        """∂n/∂p, ∂t1/∂p, ∂t2/∂p (K,3,3) of the obstacles' contact frames at the centreline points, by central
        differences of the obstacle queries (cheap: 6 queries of k points)."""
        m = self.model
        p = kin.p[m.grid.contact_index]
        r = m.contact_radius_m
        delta = 1e-7 * m.rod.length_m
        out = [np.zeros((self.k, 3, 3)) for _ in range(3)]
        for e in range(3):
            dp = np.zeros(3)
            dp[e] = delta
            plus = [ob.query(p + dp, r) for ob in m.contact.obstacles]
            minus = [ob.query(p - dp, r) for ob in m.contact.obstacles]
            for f in range(3):
                hi = np.concatenate([x[1 + f] for x in plus])
                lo = np.concatenate([x[1 + f] for x in minus])
                out[f][:, :, e] = (hi - lo) / (2 * delta)
        return out

    def _add_frame_rotation_terms(self, jac, contact, kin, v):
        """Dependence of the contact frame (n, t1, t2) on the configuration, for a curved obstacle: the
        force Σ J_cᵀ F with F = σ(λ_n n + λ_t1 t1 + λ_t2 t2) turns with n(p), the slip tᵀ J_c v with t(p)."""
        dn, dt1, dt2 = self._obstacle_frame_derivatives(kin)
        sc, h, nf = self.scales, self.h, self.n_free
        cq = contact["query"]
        # Nodes in contact only: at a separated node the force is the sigmoid's tiny negative tail, and inside
        # a tube near its centreline the frame is singular (∂n/∂p ~ 1/distance).
        touching = (contact["lam_n"] > 0.0).astype(float)
        lam_n, lam_t = contact["lam_n"] * touching, contact["lam_t"] * touching[:, None]
        dforce = sc.force_n * (
            lam_n[:, None, None] * dn + lam_t[:, 0, None, None] * dt1 + lam_t[:, 1, None, None] * dt2
        )
        jp = cq.jac_position[:, :, self.free]
        jc = cq.jac_contact[:, :, self.free]
        geo = np.einsum("kin,kij,kjm->nm", jc, dforce, jp)
        jac[:nf, :nf] += -h * h * self._row_scale[:, None] * geo
        vel = np.einsum("kin,n->ki", cq.jac_contact, v)
        cols = nf + 3 * np.arange(self.k)
        for b, dt in enumerate((dt1, dt2)):
            jac[cols + 1 + b, :nf] += h * np.einsum("ki,kij,kjm->km", vel * touching[:, None], dt, jp) / sc.slip_m_s

    def _jacobian_reference(self, x: np.ndarray) -> np.ndarray:
        """Plain-numpy assembly of the Newton matrix (tests compare `jacobian` against it)."""
        jac, contact, kin = self._matrix_without_contact(x)
        if contact is None:
            return jac
        s = self._row_scale
        nf, k = self.n_free, self.k
        h, sc = self.h, self.scales
        cq = contact["query"]
        jc = cq.jac_contact[:, :, self.free]  # (k,3,nf)
        jp = cq.jac_position[:, :, self.free]
        bt = contact["basis_t"]
        dlam_n = contact["dlam_n"]
        # d(force_j)/d(u_n,j) and d(force_j)/d(u_t,j) in world coordinates
        dlt_dun = contact["dlt_da"] * contact["dbound_dun"][:, None]
        df_dun = sc.force_n * (dlam_n[:, None] * cq.normal + np.einsum("ka,kai->ki", dlt_dun, bt))
        df_dut = sc.force_n * np.einsum("kai,kab->kib", bt, contact["dlt_du"])  # (k,3,2)
        cols = nf + 3 * np.arange(k)
        rows_dyn = -h * s[:, None]
        jac[:nf, cols] = rows_dyn * np.einsum("kin,ki->nk", jc, df_dun)
        jtd = np.einsum("kin,kib->nkb", jc, df_dut)
        jac[:nf, cols + 1] = rows_dyn * jtd[:, :, 0]
        jac[:nf, cols + 2] = rows_dyn * jtd[:, :, 1]
        # gap rows
        jac[cols, :nf] = h * np.einsum("ki,kin->kn", cq.normal, jp) / sc.gap_m
        jac[cols, cols] = -contact["dgap_map"]
        # slip rows
        jt = np.einsum("kai,kin->kan", bt, jc) / sc.slip_m_s  # (k,2,nf)
        jac[cols + 1, :nf] = jt[:, 0]
        jac[cols + 2, :nf] = jt[:, 1]
        dslip_dun = contact["dslip_da"] * contact["dbound_dun"][:, None]
        for a in range(2):
            jac[cols + 1 + a, cols] = -dslip_dun[:, a]
            jac[cols + 1 + a, cols + 1] = -contact["dslip_du"][:, a, 0]
            jac[cols + 1 + a, cols + 2] = -contact["dslip_du"][:, a, 1]
        if self.frame_terms and any(not isinstance(ob, Plane) for ob in self.model.contact.obstacles):
            self._add_frame_rotation_terms(jac, contact, kin, self.unpack(x)[0])
        return jac


def predicted_slack(problem: StepProblem, slack: np.ndarray, v_guess: np.ndarray) -> np.ndarray:
    """Warm start of the slacks: nodes separated at the last step get u_n = −δ_pred/σ_δ from the gap predicted
    at q + h q̇. That is exact while they stay separated and, for a node about to hit, the slack of the force
    that stops the predicted penetration in one step when σ_δ is the inertial default σ_λ h²/m_node (a set
    `gap_scale_m` makes that a rougher start) — Newton then starts with the right active set at an impact
    instead of discovering it node by node."""
    slack = slack.copy()
    if problem.model.contact is None:
        return slack
    separated = slack[:, 0] < 0
    if np.any(separated):
        cq = contact_query(problem.model, problem.kinematics_at(v_guess))
        slack[separated, 0] = -cq.gap_m[separated] / problem.scales.gap_m
    return slack


def regular_law(smoothing: Smoothing) -> Smoothing | None:
    """The Heaviside law that a trigonometric smoothing is iterated on (None: iterate the smoothing itself)."""
    if smoothing.kind != "trigonometric":
        return None
    return Smoothing("heaviside", tangent_epsilon=smoothing.tangent_epsilon)


def step_info(model: RodModel, q, result, r_dyn, dt_s: float, kin, contact, multipliers) -> StepInfo:
    """What a converged step reports (one rod): Newton's numbers, the base wrench, the contact field."""
    k = model.n_contact_nodes
    return StepInfo(
        iterations=result.iterations,
        residual=result.residual_norm,
        used_fallback=result.used_fallback,
        base_wrench=base_wrench(model, q, r_dyn / dt_s, kin),
        contact_force_n=contact["force"] if contact else np.zeros((k, 3)),
        contact_gap_m=contact["query"].gap_m if contact else np.zeros(k),
        contact_slip_m_s=contact["slip"] if contact else np.zeros((k, 2)),
        constraint_multipliers=multipliers,
    )


def base_wrench(
    model: RodModel, q: np.ndarray, reaction_generalized: np.ndarray, kin: Kinematics | None = None
) -> np.ndarray:
    """World wrench [moment about p0; force] the base support applies on the rod.

    The α rows of the unconstrained residual are the generalized reaction J_α(0)ᵀ W_body; inverting J_α(0)
    gives the body wrench, rotated into the world frame. (A force sensor at the flange reads its negative.)
    """
    if model.base == "free":
        return np.zeros(6)
    kin0 = kin if kin is not None else kinematics(model, q)
    j_alpha = kin0.J[0, :, 0:6]
    w_body = np.linalg.solve(j_alpha.T, reaction_generalized[0:6])
    R0 = kin0.R[0]
    return np.concatenate([R0 @ w_body[0:3], R0 @ w_body[3:6]])
