"""Several Cosserat rods in one implicit-Euler Newton system per step, with frictional rod–rod contact.

Why one system: the paper solves one nonlinear system per step; splitting the rods (solve A with B's force
frozen, then B) would lag the contact impulse by an iteration and lose Newton's third law within the step.
Here the unknowns are every rod's own step unknowns (its free q̇, its obstacle slacks, its constraint
multipliers: exactly `step_problem.StepProblem`'s x) followed by the slacks [u_n, u_t1, u_t2] of each rod–rod pair.

Rod–rod contact (`PairContact(a, b)`), sphere-swept centrelines: for each pair node of rod A at centreline
point p_A, the closest point c_B of rod B's centreline, taken as the C¹ cubic Hermite curve through all of
B's sweep points with the sweep's tangents (segment-wise; the parameter t on the segment is a function of the
configuration; see `closest_points_on_centreline` for why not the polyline). Then

  gap = ‖p_A − c_B‖ − r_A(x) − r_B(x'),   n = (p_A − c_B)/‖p_A − c_B‖ (from B into A),
  F = σ_λ (f(u_n) n + [t1 t2] W(u_t) u_t) on A at its contact point p_A − r_A n, and −F on B at c_B + r_B n,
  slip = [t1 t2]ᵀ (v_A,c − v_B,c), the relative velocity of the two contact points,

with the same slack maps, friction bound and scale rules as the obstacle contact (`_slack_kernels.
contact_laws`). Both rods' dynamic rows get their share through their own point Jacobians (J_cAᵀF, −J_cBᵀF):
Newton's third law holds within the step. At an interior closest point c′ ⟂ n, so ∂gap/∂q = nᵀ(J_pA − J_c)
(envelope theorem) minus, for a tapered B, r_B′·∂x′/∂q with ∂t/∂q from the stationarity (c − p)·c′ = 0. The
turning of the contact frame (∂n/∂q, ∂t/∂q) in the force and slip is dropped from the Newton matrix, like the
other geometry terms of the quasi-Newton matrix (`dynamics` module docstring). The pair blocks are analytic;
`tests/sim/cosserat/test_multirod.py` checks them against central differences.

Pair nodes: the sweep points of A at x_j = jL_A/m (`pair_contact_points`); rod A must have them in its sweep
(`build_model(..., contact=ContactSettings(m_sections=m))` or `extra_points_m=pair_contact_points(L, m)`).
The contact is one-sided (A's nodes against B's centreline): choose as A the rod whose nodes are the denser
ones relative to the radii (node spacing ≲ r_A + r_B, else B can pass between A's nodes).

Smoothing: sigmoid and Heaviside are iterated in their own slacks. A trigonometric smoothing (of a pair or of
a rod's obstacles) is iterated, as in the single-rod step (`NewtonSettings.regular_slack_coordinates`), on the
Heaviside maps in the regular slack coordinates y = φ(u) and mapped back; the step is accepted only if the
trigonometric residual at the mapped slacks meets the tolerance.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sim.cosserat._slack_kernels import (
    ContactLaws,
    contact_laws,
    regular_from_slack,
    smoothing_arguments,
    trigonometric_slack_from_regular,
)
from sim.cosserat.constraints import constraint_residual
from sim.cosserat.contact import ContactScales, slack_scales
from sim.cosserat.dynamics import joined_halves
from sim.cosserat.model import ContactLaw, RodModel, RodState
from sim.cosserat.newton import ConvergenceError, NewtonResult, NewtonSettings, solve
from sim.cosserat.pair_geometry import (
    PairQuery,
    pair_frame_derivatives,
    pair_query,
)
from sim.cosserat.rod import RodParameterError
from sim.cosserat.slack import Smoothing
from sim.cosserat.step_problem import StepInfo, StepProblem, predicted_slack, regular_law, step_info

log = logging.getLogger(__name__)

_DEFAULT_NEWTON = NewtonSettings()


def pair_contact_points(length_m: float, m_sections: int) -> tuple[float, ...]:
    """Arc lengths of the pair nodes x_j = jL/m (pass as `extra_points_m` to `build_model` for a rod A that
    has no obstacle contact with the same m)."""
    return tuple(float(x) for x in np.linspace(0.0, length_m, m_sections + 1))


@dataclass(frozen=True)
class PairContact(ContactLaw):
    """Frictional contact of rod `a`'s pair nodes (m_sections + 1) against rod `b`'s centreline:
    ``PairContact(0, 1, friction_coefficient=0.3, m_sections=20)``.

    force_scale_n (σ_λ) defaults to the weight of one of A's node shares, m_A/m·max(|g|, 1); gap_scale_m and
    slip_scale_m_s default to the inertial rule σ_δ = σ_λh²/m_node, σ_v = σ_λh/m_node (as `ContactSettings`)."""

    a: int
    b: int

    def __post_init__(self) -> None:
        if self.a == self.b:
            raise RodParameterError(f"pair contact needs two different rods, got a = b = {self.a}")
        self.check("pair")


@dataclass(frozen=True, eq=False)
class RodSystem:
    """Immutable description of several rods (each with its own base, obstacles, constraints) and the
    contacts between them."""

    models: tuple[RodModel, ...]
    pairs: tuple[PairContact, ...] = ()
    pair_index: tuple[np.ndarray, ...] = ()  # per pair: sweep-point index of A's pair nodes
    pair_radius_m: tuple[np.ndarray, ...] = ()  # per pair: r_A at the pair nodes


def build_system(models: Sequence[RodModel], pairs: Sequence[PairContact] = ()) -> RodSystem:
    """Check the pairs against the rods and locate A's pair nodes in A's sweep."""
    models = tuple(models)
    if not models:
        raise RodParameterError("a rod system needs at least one rod")
    index, radius = [], []
    seen = set()
    for pair in pairs:
        if (pair.b, pair.a) in seen or (pair.a, pair.b) in seen:
            raise RodParameterError(
                f"rods {pair.a} and {pair.b} already have a pair contact: one pair per two rods (a two-pass pair "
                "(a, b) + (b, a) makes the two node-to-curve constraints of a crossing redundant, and Newton's matrix "
                "singular once both touch: measured ConvergenceError at the first contact)"
            )
        seen.add((pair.a, pair.b))
        for which in (pair.a, pair.b):
            if not 0 <= which < len(models):
                raise RodParameterError(f"pair rod index {which} is out of range 0..{len(models) - 1}")
        ma = models[pair.a]
        xs = np.asarray(pair_contact_points(ma.rod.length_m, pair.m_sections))
        grid = ma.grid
        idx = np.searchsorted(grid.x_points, xs - 1e-12 * ma.rod.length_m)
        idx = np.clip(idx, 0, len(grid.x_points) - 1)
        if not np.allclose(grid.x_points[idx], xs, rtol=0.0, atol=1e-10 * ma.rod.length_m):
            raise RodParameterError(
                f"rod {pair.a} has no sweep points at its pair nodes x = jL/{pair.m_sections}: build it with "
                f"contact m_sections = {pair.m_sections} or extra_points_m=pair_contact_points(L, {pair.m_sections})"
            )
        index.append(idx.astype(np.int64))
        radius.append(ma.rod.radius_m(xs))
    return RodSystem(models, tuple(pairs), tuple(index), tuple(radius))


@dataclass
class RodSystemState:
    """Mutable state: one `RodState` per rod (its own t_s kept equal) and the slacks of each pair."""

    t_s: float
    rods: list[RodState]
    pair_slack: list[np.ndarray]  # per pair (m+1, 3)

    def copy(self) -> RodSystemState:
        return RodSystemState(self.t_s, [s.copy() for s in self.rods], [s.copy() for s in self.pair_slack])


def initial_system_state(system: RodSystem, rods: Sequence[RodState]) -> RodSystemState:
    """The given rod states (from `initial_state`) and separated pair slacks."""
    if len(rods) != len(system.models):
        raise RodParameterError(f"{len(system.models)} rods need {len(system.models)} states, got {len(rods)}")
    slacks = []
    for pair in system.pairs:
        s = np.zeros((pair.m_sections + 1, 3))
        s[:, 0] = -1.0
        slacks.append(s)
    t = float(rods[0].t_s)
    return RodSystemState(t, [r.copy() for r in rods], slacks)


def system_pair_query(system: RodSystem, p: int, kin_a, kin_b) -> PairQuery:
    """`pair_geometry.pair_query` of the system's pair p."""
    pair = system.pairs[p]
    models = system.models
    return pair_query(models[pair.a], models[pair.b], system.pair_index[p], system.pair_radius_m[p], kin_a, kin_b)


def pair_scales(system: RodSystem, pair: PairContact, dt_s: float) -> ContactScales:
    """The pair's slack scales, set from rod A (whose nodes carry the pair's contact) as for an obstacle."""
    return slack_scales(system.models[pair.a], pair, dt_s)


@dataclass
class _PairEvaluation:
    query: PairQuery
    force: np.ndarray  # (k,3) on A (B gets −force)
    velocity: np.ndarray  # (k,3) of A's contact point relative to B's
    slip: np.ndarray  # (k,2)
    r_gap: np.ndarray
    r_slip: np.ndarray
    laws: ContactLaws


class SystemStepProblem:
    """The one nonlinear system of a step of all rods: per-rod `StepProblem`s plus the pair contacts."""

    def __init__(self, system: RodSystem, state: RodSystemState, dt_s: float, base_alpha_next, regular: bool = False):
        """`regular`: exact (trigonometric) smoothings are replaced by the Heaviside maps, whose slacks are the
        regular coordinates of the trigonometric ones (see `_single_system_step`)."""
        self.system, self.h = system, dt_s
        self.rods = [
            StepProblem(
                model,
                rod_state,
                dt_s,
                None if base_alpha_next is None else base_alpha_next[i],
                regular_law(model.contact.smoothing) if regular and model.contact is not None else None,
            )
            for i, (model, rod_state) in enumerate(zip(system.models, state.rods, strict=True))
        ]
        self.pair_laws = [(regular_law(pair.smoothing) if regular else None) or pair.smoothing for pair in system.pairs]
        sizes = [r.n_free + 3 * r.k + r.n_c for r in self.rods]
        self.rod_offset = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
        self.pair_k = [pair.m_sections + 1 for pair in system.pairs]
        self.pair_offset = (
            self.rod_offset[-1] + np.concatenate([[0], np.cumsum([3 * k for k in self.pair_k])])
        ).astype(int)
        self.size = int(self.pair_offset[-1])
        self.scales = [pair_scales(system, pair, dt_s) for pair in system.pairs]
        self.frame_terms = False  # NewtonSettings.contact_frame_terms: pair frame turning in the matrix
        self._cache: tuple[bytes, tuple] | None = None

    # --- packing ---------------------------------------------------------------------------------------------
    def rod_x(self, x: np.ndarray, i: int) -> np.ndarray:
        return x[self.rod_offset[i] : self.rod_offset[i + 1]]

    def pair_slack(self, x: np.ndarray, p: int) -> np.ndarray:
        return x[self.pair_offset[p] : self.pair_offset[p + 1]].reshape(-1, 3)

    def pack(self, rod_x: Sequence[np.ndarray], pair_slacks: Sequence[np.ndarray]) -> np.ndarray:
        return np.concatenate([*rod_x, *(s.reshape(-1) for s in pair_slacks), np.zeros(0)])

    # --- evaluation ------------------------------------------------------------------------------------------
    def evaluate(self, x: np.ndarray) -> tuple:
        """Per rod (r_dyn with the pair forces, contact, kin, v), per pair `_PairEvaluation`; cached."""
        key = x.tobytes()
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        rods = []
        for i, sub in enumerate(self.rods):
            xi = self.rod_x(x, i)
            r_dyn, contact, kin = sub.evaluate(xi)
            rods.append([r_dyn.copy(), contact, kin, sub.unpack(xi)[0]])
        pairs = []
        for p, pair in enumerate(self.system.pairs):
            sc = self.scales[p]
            a, b = rods[pair.a], rods[pair.b]
            q = system_pair_query(self.system, p, a[2], b[2])
            slack = self.pair_slack(x, p)
            kind, sharpness, eps = smoothing_arguments(self.pair_laws[p])
            laws = contact_laws(
                kind, sharpness, eps, pair.friction_coefficient, sc.force_n, slack, q.normal, q.t1, q.t2
            )
            force = laws.force
            vel = np.einsum("kin,n->ki", q.jac_contact_a, a[3]) - np.einsum("kin,n->ki", q.jac_contact_b, b[3])
            slip = np.column_stack([np.sum(q.t1 * vel, axis=1), np.sum(q.t2 * vel, axis=1)])
            a[0] -= self.h * np.einsum("kin,ki->n", q.jac_contact_a, force)
            b[0] += self.h * np.einsum("kin,ki->n", q.jac_contact_b, force)
            pairs.append(
                _PairEvaluation(
                    q, force, vel, slip, q.gap_m / sc.gap_m - laws.gap_map, slip / sc.slip_m_s - laws.slip_map, laws
                )
            )
        out = (rods, pairs)
        self._cache = (key, out)
        return out

    def residual(self, x: np.ndarray) -> np.ndarray:
        rods, pairs = self.evaluate(x)
        parts = []
        for sub, (r_dyn, contact, kin, _) in zip(self.rods, rods, strict=True):
            if sub._row_scale is None:
                sub._iteration_matrix(kin)
            parts.append(r_dyn[sub.free] * sub._row_scale)
            if contact is not None:
                parts.append(np.column_stack([contact["r_gap"], contact["r_slip"]]).reshape(-1))
            if sub.n_c:
                m = sub.model
                parts.append(
                    constraint_residual(m.constraints, m.constraint_index, kin.R, kin.p) * sub.constraint_row_scale
                )
        for ev in pairs:
            parts.append(np.column_stack([ev.r_gap, ev.r_slip]).reshape(-1))
        return np.concatenate(parts)

    def error_norm(self, x: np.ndarray, r: np.ndarray) -> float:
        """Each rod's rows measured as `StepProblem.error_norm` (dynamic rows relative to the rod's own speed),
        the pair rows by ‖·‖∞."""
        rods = [sub.error_norm(self.rod_x(x, i), self.rod_x(r, i)) for i, sub in enumerate(self.rods)]
        pairs = float(np.max(np.abs(r[self.rod_offset[-1] :]))) if self.size > self.rod_offset[-1] else 0.0
        return max([pairs, *rods])

    def jacobian(self, x: np.ndarray) -> np.ndarray:
        """Block-diagonal per-rod Newton matrices plus the analytic pair rows and columns."""
        rods, pairs = self.evaluate(x)
        jac = np.zeros((self.size, self.size))
        for i, sub in enumerate(self.rods):
            sl = slice(self.rod_offset[i], self.rod_offset[i + 1])
            jac[sl, sl] = sub.jacobian(self.rod_x(x, i))
        h = self.h
        for p, (pair, ev) in enumerate(zip(self.system.pairs, pairs, strict=True)):
            sc, q = self.scales[p], ev.query
            laws = ev.laws
            dgap_map, dbound_dun, dslip_da, dslip_du = laws.dgap_map, laws.dbound_dun, laws.dslip_da, laws.dslip_du
            df_dun, df_dut = laws.df_dun, laws.df_dut
            cols = self.pair_offset[p] + 3 * np.arange(self.pair_k[p])
            c0, c1 = self.pair_offset[p], self.pair_offset[p + 1]
            basis_t = np.stack([q.t1, q.t2], axis=1)  # (k,2,3)
            for rod, sign, jc, gap_grad in (
                (pair.a, 1.0, q.jac_contact_a, q.gap_grad_a),
                (pair.b, -1.0, q.jac_contact_b, q.gap_grad_b),
            ):
                sub = self.rods[rod]
                rows = slice(self.rod_offset[rod], self.rod_offset[rod] + sub.n_free)
                jcf = jc[:, :, sub.free]
                scale = -sign * h * sub._row_scale[:, None]
                jac[rows, c0:c1:3] = scale * np.einsum("kin,ki->nk", jcf, df_dun)
                jtd = np.einsum("kin,kib->nkb", jcf, df_dut)
                jac[rows, c0 + 1 : c1 : 3] = scale * jtd[:, :, 0]
                jac[rows, c0 + 2 : c1 : 3] = scale * jtd[:, :, 1]
                jac[c0:c1:3, rows] = h * gap_grad[:, sub.free] / sc.gap_m
                jt = sign * np.einsum("kai,kin->kan", basis_t, jcf) / sc.slip_m_s
                jac[c0 + 1 : c1 : 3, rows] = jt[:, 0]
                jac[c0 + 2 : c1 : 3, rows] = jt[:, 1]
            if self.frame_terms:
                self._add_frame_turning(jac, p, ev)
            jac[cols, cols] = -dgap_map
            dslip_dun = dslip_da * dbound_dun[:, None]
            for b in range(2):
                jac[cols + 1 + b, cols] = -dslip_dun[:, b]
                jac[cols + 1 + b, cols + 1] = -dslip_du[:, b, 0]
                jac[cols + 1 + b, cols + 2] = -dslip_du[:, b, 1]
        return jac

    def _add_frame_turning(self, jac: np.ndarray, p: int, ev: _PairEvaluation) -> None:
        """The turning of the pair frame (n, t1, t2) with the configuration, at touching nodes: in the force
        F = σ(Λ_n n + Λ_t1 t1 + Λ_t2 t2) on both rods' dynamic rows and in the slip rows tᵀ(v_A,c − v_B,c)
        (q = q_prev + h q̇, so ∂/∂q̇ = h ∂/∂q). `pair_frame_derivatives` is exact (test)."""
        pair, q, h, sc = self.system.pairs[p], ev.query, self.h, self.scales[p]
        lam_n, lam_t = ev.laws.lam_n, ev.laws.lam_t
        touching = (lam_n > 0.0).astype(float)
        dn_a, dn_b, dt1_a, dt1_b, dt2_a, dt2_b = pair_frame_derivatives(q)
        cols_pair = self.pair_offset[p] + 3 * np.arange(self.pair_k[p])
        for col_rod, dn, dt1, dt2 in ((pair.a, dn_a, dt1_a, dt2_a), (pair.b, dn_b, dt1_b, dt2_b)):
            col_sub = self.rods[col_rod]
            cols = self.rod_offset[col_rod] + np.arange(col_sub.n_free)
            free = col_sub.free
            dforce = (
                sc.force_n
                * touching[:, None, None]
                * (
                    lam_n[:, None, None] * dn[:, :, free]
                    + lam_t[:, 0, None, None] * dt1[:, :, free]
                    + lam_t[:, 1, None, None] * dt2[:, :, free]
                )
            )
            for row_rod, sign, jc in ((pair.a, 1.0, q.jac_contact_a), (pair.b, -1.0, q.jac_contact_b)):
                row_sub = self.rods[row_rod]
                rows = self.rod_offset[row_rod] + np.arange(row_sub.n_free)
                geo = np.einsum("kin,kim->nm", jc[:, :, row_sub.free], dforce)
                jac[np.ix_(rows, cols)] += -sign * h * h * row_sub._row_scale[:, None] * geo
            for b, dt in enumerate((dt1, dt2)):
                slip_turn = np.einsum("ki,kin->kn", ev.velocity * touching[:, None], dt[:, :, free])
                jac[np.ix_(cols_pair + 1 + b, cols)] += h * slip_turn / sc.slip_m_s

    def residual_and_lazy_jacobian(self, x: np.ndarray):
        return self.residual(x), lambda: self.jacobian(x)


@dataclass
class PairInfo:
    """Per pair node: the world force on rod A (rod B gets the opposite), gap and relative slip."""

    force_n: np.ndarray  # (k,3)
    gap_m: np.ndarray  # (k,)
    slip_m_s: np.ndarray  # (k,2)
    segment_b: np.ndarray  # (k,) closest segment of B (sweep points i, i+1)


@dataclass
class SystemStepInfo:
    iterations: int
    residual: float
    rods: list[StepInfo]  # base wrench includes the pair forces
    pairs: list[PairInfo]
    substeps: int = 1


def step_rods(
    system: RodSystem,
    state: RodSystemState,
    dt_s: float,
    settings: NewtonSettings = _DEFAULT_NEWTON,
    base_alpha_next: Sequence[np.ndarray | None] | None = None,
    max_halvings: int = 5,
) -> SystemStepInfo:
    """Advance all rods by one implicit-Euler step (in place); halve on non-convergence as `dynamics.step` (a
    halved step reports impulse / dt), then raise `ConvergenceError` with the state untouched."""
    if not dt_s > 0:
        raise ValueError(f"dt_s must be > 0, got {dt_s!r}")
    if base_alpha_next is not None and len(base_alpha_next) != len(system.models):
        raise ValueError(f"base_alpha_next needs one entry (or None) per rod: {len(system.models)} expected")
    try:
        return _single_system_step(system, state, dt_s, settings, base_alpha_next)
    except ConvergenceError:
        if max_halvings <= 0:
            raise
    log.debug("t=%.4f s: system step %.2e s did not converge; two half steps", state.t_s, dt_s)
    backup = state.copy()
    mid = None
    if base_alpha_next is not None:
        mid = [
            None if target is None else 0.5 * (s.q[0:6] + np.asarray(target, float))
            for s, target in zip(state.rods, base_alpha_next, strict=True)
        ]
    try:
        first = step_rods(system, state, 0.5 * dt_s, settings, mid, max_halvings - 1)
        second = step_rods(system, state, 0.5 * dt_s, settings, base_alpha_next, max_halvings - 1)
    except ConvergenceError:
        state.t_s = backup.t_s
        for rod_state, saved in zip(state.rods, backup.rods, strict=True):  # in place: callers hold these
            rod_state.t_s, rod_state.q, rod_state.v, rod_state.slack = saved.t_s, saved.q, saved.v, saved.slack
        for p, saved in enumerate(backup.pair_slack):
            state.pair_slack[p] = saved
        raise
    return _joined_system(first, second)


def _joined_system(first: SystemStepInfo, second: SystemStepInfo) -> SystemStepInfo:
    """Two equal half steps as one, as `dynamics.joined_halves`: every rod's and pair's forces averaged over the step
    (impulse / dt, what one full step reports), the end state's gaps and slips."""
    pairs = [
        dataclasses.replace(b, force_n=0.5 * (a.force_n + b.force_n))
        for a, b in zip(first.pairs, second.pairs, strict=True)
    ]
    return SystemStepInfo(
        iterations=first.iterations + second.iterations,
        residual=second.residual,
        rods=[joined_halves(a, b) for a, b in zip(first.rods, second.rods, strict=True)],
        pairs=pairs,
        substeps=first.substeps + second.substeps,
    )


def _uses_regular_coordinates(system: RodSystem, settings: NewtonSettings) -> bool:
    kinds = [m.contact.smoothing.kind for m in system.models if m.contact is not None]
    kinds += [pair.smoothing.kind for pair in system.pairs]
    return settings.regular_slack_coordinates and "trigonometric" in kinds


def _to_regular(smoothing: Smoothing, mu: float, slack: np.ndarray) -> np.ndarray:
    return regular_from_slack(smoothing, mu, slack) if smoothing.kind == "trigonometric" else slack


def _from_regular(smoothing: Smoothing, mu: float, slack: np.ndarray) -> np.ndarray:
    if smoothing.kind != "trigonometric":
        return slack
    return trigonometric_slack_from_regular(smoothing.sharpness, mu, np.ascontiguousarray(slack))


def _single_system_step(system, state, dt_s, settings, base_alpha_next) -> SystemStepInfo:
    regular = _uses_regular_coordinates(system, settings)
    problem = SystemStepProblem(system, state, dt_s, base_alpha_next, regular)
    problem.frame_terms = settings.contact_frame_terms
    for sub in problem.rods:
        sub.frame_terms = settings.contact_frame_terms
    rod_x, guesses = [], []
    for model, sub, rod_state in zip(system.models, problem.rods, state.rods, strict=True):
        v_guess = rod_state.v.copy()
        if model.base == "clamped":
            v_guess[0:6] = sub.v_fixed[0:6]
        guesses.append(v_guess)
        slack = rod_state.slack
        if regular and model.contact is not None:
            slack = _to_regular(model.contact.smoothing, model.contact.friction_coefficient, slack)
        rod_x.append(sub.pack(v_guess, predicted_slack(sub, slack, v_guess)))
    pair_slacks = []
    for p, pair in enumerate(system.pairs):
        slack = state.pair_slack[p].copy()
        if regular:
            slack = _to_regular(pair.smoothing, pair.friction_coefficient, slack)
        separated = slack[:, 0] < 0
        if np.any(separated):  # as `_predicted_slack`: gap at q + h q̇ for separated nodes
            ka = problem.rods[pair.a].kinematics_at(guesses[pair.a])
            kb = problem.rods[pair.b].kinematics_at(guesses[pair.b])
            gap = system_pair_query(system, p, ka, kb).gap_m
            slack[separated, 0] = -gap[separated] / problem.scales[p].gap_m
        pair_slacks.append(slack)
    x0 = problem.pack(rod_x, pair_slacks)
    # no finite-difference / Levenberg–Marquardt fallback for systems (a dense FD Jacobian of ~300 unknowns per
    # stalled step): without a fallback_jacobian `solve` raises where the quasi-Newton iteration stalls; halving
    # and ConvergenceError remain
    result = solve(problem.residual_and_lazy_jacobian, x0, settings, error_norm=problem.error_norm)
    if regular:
        problem, result = _back_to_model_slacks(system, state, dt_s, base_alpha_next, problem, result, settings)
    rods, pairs = problem.evaluate(result.x)
    infos = []
    for i, (model, sub, rod_state) in enumerate(zip(system.models, problem.rods, state.rods, strict=True)):
        xi = problem.rod_x(result.x, i)
        v, slack = sub.unpack(xi)
        r_dyn, contact, kin, _ = rods[i]
        rod_state.q = rod_state.q + dt_s * v
        rod_state.v = v
        rod_state.slack = slack.copy()
        rod_state.t_s += dt_s
        infos.append(step_info(model, rod_state.q, result, r_dyn, dt_s, kin, contact, sub.multipliers(xi)))
    pair_infos = []
    for p, ev in enumerate(pairs):
        state.pair_slack[p] = problem.pair_slack(result.x, p).copy()
        pair_infos.append(PairInfo(ev.force.copy(), ev.query.gap_m.copy(), ev.slip.copy(), ev.query.segment.copy()))
    state.t_s += dt_s
    return SystemStepInfo(result.iterations, result.residual_norm, infos, pair_infos)


def _back_to_model_slacks(system, state, dt_s, base_alpha_next, problem, result, settings):
    """Map a regular-coordinate solution to the model's (trigonometric) slacks and accept it only if the
    system's own residual there, with the same row scales, meets the tolerance (as `dynamics._back_to_model_slacks`)."""
    own = SystemStepProblem(system, state, dt_s, base_alpha_next)
    for sub in own.rods:
        sub.frame_terms = settings.contact_frame_terms
    x = result.x.copy()
    for i, (model, sub, own_sub) in enumerate(zip(system.models, problem.rods, own.rods, strict=True)):
        own_sub._row_scale = sub._row_scale
        if model.contact is None:
            continue
        sl = slice(problem.rod_offset[i] + sub.n_free, problem.rod_offset[i] + sub.n_free + 3 * sub.k)
        c = model.contact
        x[sl] = _from_regular(c.smoothing, c.friction_coefficient, x[sl].reshape(-1, 3)).reshape(-1)
    for p, pair in enumerate(system.pairs):
        sl = slice(problem.pair_offset[p], problem.pair_offset[p + 1])
        x[sl] = _from_regular(pair.smoothing, pair.friction_coefficient, x[sl].reshape(-1, 3)).reshape(-1)
    residual = own.error_norm(x, own.residual(x))
    if residual > settings.tolerance:
        raise ConvergenceError(
            f"the trigonometric residual at the mapped regular-coordinate solution is {residual:.3e} > "
            f"tolerance {settings.tolerance:.1e}"
        )
    return own, NewtonResult(x, result.iterations, residual, result.used_fallback)
