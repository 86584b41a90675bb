"""Flipping controllers for planar RHex (paper 003, IV-B): maximal thrust over all modes, and the blind one.

Both see a `RigidObservation`, build the rigid model with massless hip DOFs, and return hip torques with the
model's *prediction* of the pitch acceleration (Table V compares it with the benchmark simulation).
Only legs whose toes touch the ground are commanded; `flip.airborne_leg_torques` handles the others.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from dataclasses import dataclass, field

import numpy as np

from .. import dense_lp
from ..analysis import FULL_DIM_RADIUS
from ..batch import BatchSolution, solve_batch
from ..mode_solution import ModeSolution, solve_mode
from ..modes import classify_contacts
from ..polytope import HPolytope, eliminate_one_sided, fourier_motzkin, lp_backend, projected_dimension
from .params import RHexParameters
from .rigid import RigidObservation, rigid_snapshot

LOG = logging.getLogger(__name__)
ALPHA = 2  # index of the pitch in q


@dataclass(frozen=True)
class Command:
    tau_Nm: np.ndarray  # (3,)
    predicted_alpha_ddot: float  # rad/s², nan if no model applied
    mode: str  # e.g. "toe1:F toe2:L body:R"
    modes_considered: int = 0
    lps_solved: int = 0


def _label(names, mode) -> str:
    return " ".join(f"{n}:{c}" for n, c in zip(names, mode, strict=True))


class _TorqueLP:
    """max c·τ over (τ, w) ∈ P ∩ {|τ| <= tau_max} [∩ extra rows on τ], set up once per mode.

    Ambiguity variables that appear with one sign only are eliminated first (exact: the objective does not
    involve w), and w columns left empty are dropped, so the dense LP stays small.
    """

    def __init__(self, P: HPolytope, n_tau: int, tau_max: float):
        t = n_tau
        N, e = P.N, P.e
        if P.A_eq.shape[0] == 0 or not P.A_eq[:, t:].any():
            N, e = eliminate_one_sided(N, e, t)
        used = np.concatenate([np.ones(t, bool), np.abs(N[:, t:]).max(axis=0, initial=0.0) > 1e-12])
        N = N[:, used]
        dim = N.shape[1]
        box = np.zeros((2 * t, dim))
        box[:t, :t] = np.eye(t)
        box[t:, :t] = -np.eye(t)
        self.t, self.dim = t, dim
        self.A_ub = np.ascontiguousarray(np.vstack([-N, box]))
        self.b_ub = np.concatenate([-e, np.full(2 * t, tau_max)])
        self.A_eq = np.ascontiguousarray(P.A_eq[:, used])
        self.b_eq = np.ascontiguousarray(P.b_eq, dtype=float)

    def maximise(self, c: np.ndarray, extra_N=None, extra_e=None):
        """Returns τ at the optimum, or None if infeasible."""
        A, b = self.A_ub, self.b_ub
        if extra_N is not None and extra_N.shape[0]:
            ext = np.zeros((extra_N.shape[0], self.dim))
            ext[:, : self.t] = -extra_N
            A, b = np.vstack([A, ext]), np.concatenate([b, -extra_e])
        obj = np.zeros(self.dim)
        obj[: self.t] = -c
        status, x, _ = dense_lp.dense_lp(obj, A, b, self.A_eq, self.b_eq)
        return x[: self.t] if status == 0 else None


def _lp_max(c: np.ndarray, P: HPolytope, n_tau: int, tau_max: float):
    return _TorqueLP(P, n_tau, tau_max).maximise(c)


def _joint_domain(a: ModeSolution, b: ModeSolution) -> HPolytope:
    """D_a ∩ D_b in (τ, w_a, w_b)."""
    t, na, nb = a.n_tau, a.n_w, b.n_w
    Da, Db = a.domain, b.domain

    def lift(P: HPolytope, offset: int, nw: int) -> tuple[np.ndarray, np.ndarray]:
        N = np.zeros((P.N.shape[0], t + na + nb))
        N[:, :t] = P.N[:, :t]
        N[:, t + offset : t + offset + nw] = P.N[:, t:]
        A = np.zeros((P.A_eq.shape[0], t + na + nb))
        A[:, :t] = P.A_eq[:, :t]
        return N, A

    Na, Aa = lift(Da, 0, na)
    Nb, Ab = lift(Db, na, nb)
    return HPolytope(
        np.vstack([Na, Nb]),
        np.concatenate([Da.e, Db.e]),
        np.vstack([Aa, Ab]),
        np.concatenate([Da.b_eq, Db.b_eq]),
    )


def _overlap_is_full_dimensional(a: ModeSolution, b: ModeSolution) -> bool:
    """Is T_a ∩ T_b as high-dimensional as T_a (an ambiguity, not a shared boundary)?

    First a quick sufficient test, one LP: a ball in the τ-directions (within the equalities) with the
    ambiguity variables held fixed. If it fails the answer comes from the affine hulls of the joint domain
    and of D_a, projected onto τ (exact, slower, rarely needed).
    """
    J = _joint_domain(a, b)
    t = a.n_tau
    rank_a = np.linalg.matrix_rank(a.domain.A_eq[:, :t], tol=1e-9) if a.domain.A_eq.shape[0] else 0
    A_eq_t = J.A_eq[:, :t]
    rank_j = np.linalg.matrix_rank(A_eq_t, tol=1e-9) if A_eq_t.shape[0] else 0
    if rank_j > rank_a:
        return False
    if A_eq_t.shape[0]:
        _, _, Vt = np.linalg.svd(A_eq_t)
        Z = Vt[rank_j:].T
    else:
        Z = np.eye(t)
    if not J.A_eq[:, t:].any():  # equalities never involve w: one-sided w rows can be dropped
        Nr, er = eliminate_one_sided(J.N, J.e, t)
        J = HPolytope(Nr, er, J.A_eq, J.b_eq)
    norms = np.linalg.norm(J.N[:, :t] @ Z, axis=1)
    dim = J.dim
    c = np.zeros(dim + 1)
    c[-1] = -1.0
    A_ub = np.vstack([-np.hstack([J.N, -norms[:, None]]), np.eye(dim + 1)[-1:]])
    b_ub = np.concatenate([-J.e, [1.0]])
    A_eq = np.hstack([J.A_eq, np.zeros((J.A_eq.shape[0], 1))])
    status, x, _ = dense_lp.solve(c, A_ub, b_ub, A_eq, J.b_eq)
    if status != 0:
        return False  # empty
    if x[-1] > FULL_DIM_RADIUS:
        return True
    # the quick test is only sufficient (w held fixed): decide exactly from the affine hulls
    with lp_backend("dense"):
        d_joint = projected_dimension(_joint_domain(a, b), range(t))
        d_a = projected_dimension(a.domain, range(t))
    return d_joint >= 0 and d_joint == d_a


def _in_torque_domains(bs: BatchSolution, tau: np.ndarray, tol: float = 1e-7) -> np.ndarray:
    """Which modes' physical torque domains T_c contain τ (vectorised; one small LP per mode with w)."""
    m = bs.UtB.shape[1]
    row = np.arange(m)[None, :]
    singular = row >= bs.ranks[:, None]
    resid = bs.UtB @ tau + bs.Utb
    scale = bs.scale + np.abs(tau).max(initial=0.0)
    ok = ~np.any(singular & (np.abs(resid) > tol * scale[:, None]), axis=1)
    slack = bs.N1Z @ tau + bs.N1z0 - bs.e1  # >= 0 required, for the part without w
    nz = bs.Z_tau.shape[1]
    has_w = bs.ranks < nz
    ok_now = ok & ~has_w & np.all(slack >= -tol * scale[:, None], axis=1)
    result = ok_now.copy()
    for j in np.flatnonzero(ok & has_w):
        r = int(bs.ranks[j])
        Nw, rhs = eliminate_one_sided(bs.N1V[j][:, r:], -slack[j], 0)  # Nw w >= -slack
        keep = np.abs(Nw).max(axis=1, initial=0.0) > 1e-12 if Nw.shape[0] else np.zeros(0, bool)
        if np.any(rhs[~keep] > tol * scale[j]):  # rows w cannot influence must already hold
            continue
        Nw, rhs = Nw[keep], rhs[keep]
        if Nw.shape[0] == 0:
            result[j] = True
            continue
        status, _, _ = dense_lp.solve(np.zeros(nz - r), -Nw, -rhs)
        result[j] = status == 0
    return result


def _trivially_infeasible(bs: BatchSolution, task) -> np.ndarray:
    """Modes whose domain (with task rows) has a row free of τ and w that fails: empty for every τ.

    Typical case: the body separating (S) while the task asks for a body normal force >= f_min. Cheap and
    vectorised, it spares those modes an LP.
    """
    nz = bs.Z_tau.shape[1]
    null_mask = (np.arange(nz)[None, :] >= bs.ranks[:, None]).astype(float)  # (K, nz) rows of Vt in N(A)
    rows_tau = [bs.N1Z]
    rows_w = [bs.N1V * null_mask[:, None, :]]
    rhs = [bs.e1 - bs.N1z0]
    if task is not None and task.ineq_z.shape[0]:
        rows_tau.append(np.einsum("ri,kit->krt", task.ineq_z, bs.Z_tau) - task.ineq_tau[None])
        rows_w.append(np.einsum("ri,kji->krj", task.ineq_z, bs.Vt) * null_mask[:, None, :])
        rhs.append(task.ineq_rhs[None, :] - np.einsum("ri,ki->kr", task.ineq_z, bs.z_0))
    Nt, Nw, e = np.concatenate(rows_tau, axis=1), np.concatenate(rows_w, axis=1), np.concatenate(rhs, axis=1)
    free = (np.abs(Nt).max(axis=2, initial=0.0) <= 1e-12) & (np.abs(Nw).max(axis=2, initial=0.0) <= 1e-12)
    return np.any(free & (e > 1e-9 * (1.0 + np.abs(e))), axis=1)


def _unactuated_prediction(bs: BatchSolution, layout) -> Command:
    """Only the body touches: report the pitch acceleration of the consistent mode with unique α̈."""
    inside = _in_torque_domains(bs, np.zeros(0))
    nz = bs.Z_tau.shape[1]
    for j in np.flatnonzero(inside):
        r = int(bs.ranks[j])
        if r == nz or np.abs(bs.Vt[j, r:, ALPHA]).max() <= 1e-9:
            return Command(np.zeros(3), float(bs.z_0[j, ALPHA]), _label(layout.contact_names, bs.modes[j]), len(bs))
    return Command(np.zeros(3), float("nan"), "no consistent mode", len(bs))


@dataclass
class MaximalThrustController:
    """Maximise α̈ over the unambiguous torque region T*_c of every feasible mode (IV-B.2).

    Exact search: modes are visited in decreasing order of an upper bound on α̈ (its value at the torque
    box's best corner), so the search stops as soon as no unvisited mode can beat the best one; within a
    mode, `_best_unambiguous` runs a best-first branch and bound with lazy ambiguity cuts. Task constraints
    (torque box, body normal force) restrict the pieces only after the overlaps are formed, as III-G.1
    requires.
    """

    params: RHexParameters
    max_lps_per_mode: int = 40
    #: The paper's task constraint: while the body touches, its normal force stays >= body_normal_min_N
    #: ("always kept greater than a manually chosen threshold to ensure continued contact of the body",
    #: IV-B.2), which also rules out every mode in which the body separates. Off only for the ablation
    #: test: without it the controller lifts the body off and does not flip.
    body_contact_task: bool = True
    stats: dict = field(default_factory=lambda: {"steps": 0, "cuts": 0})

    def __call__(self, obs: RigidObservation) -> Command:
        p = self.params
        snap, layout = rigid_snapshot(p, obs, with_task=self.body_contact_task)
        tau = np.zeros(3)
        if len(layout.contact_names) == 0:
            return Command(tau, 0.0, "flight")  # free flight: no moment about the centre of mass
        kin = classify_contacts(snap)
        if any(kin.approaching):
            return Command(tau, float("nan"), "impact")
        modes = list(itertools.product(*kin.allowed))
        bs = solve_batch(snap, kin, modes)
        if layout.n_tau == 0:  # no toe on the ground: nothing to choose, predict with the consistent mode
            return _unactuated_prediction(bs, layout)
        nz = bs.Z_tau.shape[1]
        c_all = bs.Z_tau[:, ALPHA, :]
        bounds = bs.z_0[:, ALPHA] + p.torque_limit_Nm * np.abs(c_all).sum(axis=1)
        null_alpha = np.abs(bs.Vt[:, :, ALPHA])  # (K, nz): row i of Vt is a null vector when i >= rank
        alpha_ambiguous = np.any((np.arange(nz)[None, :] >= bs.ranks[:, None]) & (null_alpha > 1e-9), axis=1)
        hopeless = _trivially_infeasible(bs, snap.task)
        order = [j for j in np.argsort(-bounds) if not (alpha_ambiguous[j] or hopeless[j])]
        cache: dict[int, ModeSolution] = {}

        def sol_of(j: int) -> ModeSolution:
            if j not in cache:
                cache[j] = bs.solution(j)
            return cache[j]

        best, best_val, best_idx, lps = None, -np.inf, -1, 0
        for idx in order:
            if bounds[idx] <= best_val + 1e-9:
                break
            tau_c, val, used = self._best_unambiguous(idx, bs, sol_of, best_val)
            lps += used
            if tau_c is not None and val > best_val:
                best, best_val, best_idx = tau_c, val, idx
        self.stats["steps"] += 1
        if best is None:
            return Command(tau, float("nan"), "no unambiguous mode", len(modes), lps)
        tau[list(layout.active_legs)] = best
        return Command(tau, best_val, _label(layout.contact_names, modes[best_idx]), len(modes), lps)

    def _best_unambiguous(self, idx: int, bs: BatchSolution, sol_of, incumbent: float):
        """max α̈ over T*_c ∩ task ∩ box by best-first branch and bound with lazy ambiguity cuts.

        A piece is T_c ∩ task ∩ box with extra rows on τ. The best piece's optimum is checked against every
        other mode; if it lies in a full-dimensional overlap K (projected by Fourier–Motzkin, once per
        conflicting mode), that piece alone is replaced by its parts outside K ('violate row r of K, keep
        rows < r'). The first conflict-free optimum is the answer: every other piece is worse even before
        its own cuts. Pieces worse than `incumbent` (another mode's value) are dropped.
        Returns (τ, α̈, LPs used); τ is None if T*_c is empty or the LP budget ran out.
        """
        sol = sol_of(idx)
        t = sol.n_tau
        c, c0 = sol.Z_tau[ALPHA], sol.z_0[ALPHA]
        lp = _TorqueLP(sol.task_domain, t, self.params.torque_limit_Nm)
        projections: dict[int, HPolytope | None] = {}
        heap: list = []
        counter = itertools.count()
        used = 0

        def push(N0: np.ndarray, e0: np.ndarray, applied: frozenset) -> None:
            nonlocal used
            used += 1
            x = lp.maximise(c, N0, e0)
            if x is not None and c @ x + c0 > incumbent + 1e-9:
                heapq.heappush(heap, (-(c @ x), next(counter), x, N0, e0, applied))

        push(np.zeros((0, t)), np.zeros(0), frozenset())
        while heap and used <= self.max_lps_per_mode:
            neg, _, x, N0, e0, applied = heapq.heappop(heap)
            conflict = self._conflict(idx, x, bs, sol_of, applied)
            if conflict is None:
                return x, float(-neg + c0), used
            self.stats["cuts"] += 1
            if conflict not in projections:
                with lp_backend("dense"):
                    projections[conflict] = fourier_motzkin(_joint_domain(sol, sol_of(conflict)), list(range(t)))
            K = projections[conflict]
            applied = applied | {conflict}
            if K is None:  # numerically empty after all: keep the piece, skip this mode next time
                heapq.heappush(heap, (neg, next(counter), x, N0, e0, applied))
                continue
            for r in range(K.N.shape[0]):
                push(np.vstack([N0, K.N[:r], -K.N[r : r + 1]]), np.concatenate([e0, K.e[:r], -K.e[r : r + 1]]), applied)
        if heap:
            LOG.debug("mode %s: LP budget of %d exhausted", sol.mode, self.max_lps_per_mode)
        return None, -np.inf, used

    def _conflict(self, idx: int, tau: np.ndarray, bs: BatchSolution, sol_of, excluded):
        inside = _in_torque_domains(bs, tau)
        me = sol_of(idx)
        for j in np.flatnonzero(inside):
            if j == idx or j in excluded:
                continue
            if _overlap_is_full_dimensional(me, sol_of(j)):
                return int(j)
        return None


@dataclass
class BlindController:
    """Two fixed contact models switched on detected rear-toe stiction (in the spirit of ref. [30]).

    Model 1: rear toe and body slide forward (R), middle and front toes slide backward (L).
    Model 2: rear toe stuck (F), body slides forward, middle and front toes slide backward.
    Each model's equalities (no consistency inequalities: the controller is 'blind' to them) give α̈(τ);
    torques maximise it within the torque box and the body normal-force threshold. The switch to model 2
    fires when the measured pitch acceleration exceeds model 1's prediction by `switch_margin_rad_s2` on
    `switch_count` consecutive control steps (an empirically tuned detector, as in [30]).

    Tuning (paper IV-C.2: the detector was tuned on linoleum, μ_t = 0.39, where it switches accurately): on
    this benchmark's linoleum flip the rear toe slides for the whole flip, and model 1 under-predicts the
    measured α̈ by up to 6.9 rad/s² on two consecutive intervals (leg compliance; toe and body not rigid).
    A margin below that switches to the stuck-toe model while the toe slides at 0.4 m/s (the earlier 4 rad/s²
    did, at t = 0.135 s on both surfaces); 10 rad/s² leaves ≈ 1.5× that nuisance level, against a stiction
    signature of ≥ 27 rad/s² on asphalt. The tests pin both facts. Margins of 7–8.5 rad/s² still fire
    falsely on asphalt (nuisance 9.2 rad/s² at t ≈ 0.13 s): see docs/planar_contact.md for the sensitivity.

    By default it sees the same sensed contacts as the maximal-thrust controller (a fair baseline). With
    `assume_contacts` it is blind to contact sensing too, as RHex's was: the body is assumed on the ground
    throughout and a leg in contact, toe on the ground, whenever its hip is low enough for the toe to reach
    it (paper: "all maintaining contact with the ground throughout flipping").
    """

    params: RHexParameters
    assume_contacts: bool = False
    switch_margin_rad_s2: float = 10.0
    switch_count: int = 2
    model: int = 1
    _hits: int = 0
    _last_prediction: float = float("nan")

    MODEL_LETTERS = {1: ("R", "L", "L"), 2: ("F", "L", "L")}

    def observe_alpha_ddot(self, measured: float) -> None:
        if self.model == 1 and np.isfinite(self._last_prediction):
            self._hits = self._hits + 1 if measured - self._last_prediction > self.switch_margin_rad_s2 else 0
            if self._hits >= self.switch_count:
                self.model = 2
                LOG.debug("blind controller: rear-toe stiction detected, switching to model 2")

    def assumed_observation(self, obs: RigidObservation) -> RigidObservation:
        """Body corner on the ground; every leg that can reach the ground touches it (forward-down)."""
        p = self.params
        y, _, a = obs.body_pos
        z = p.half_length_m * np.sin(a) + p.half_height_m * np.cos(a)
        d = np.asarray(p.hip_offsets_m)
        hip_z = z + d * np.sin(a)
        reach = hip_z < p.leg_length_m
        psi = -np.arcsin(np.clip(hip_z / p.leg_length_m, -1.0, 1.0))  # toe on the ground, ahead of the hip
        phi = np.where(reach, psi - a, obs.phi_rad)
        return RigidObservation(np.array([y, z, a]), obs.body_vel, phi, obs.phi_rate_rad_s, reach, True)

    def __call__(self, obs: RigidObservation) -> Command:
        p = self.params
        if self.assume_contacts:
            obs = self.assumed_observation(obs)
        snap, layout = rigid_snapshot(p, obs)
        tau = np.zeros(3)
        if len(layout.contact_names) == 0:
            self._last_prediction = 0.0
            return Command(tau, 0.0, "flight")
        letters = self.MODEL_LETTERS[self.model]
        mode = tuple(letters[i] for i in layout.active_legs)
        mode = mode + ("R",) * (len(layout.contact_names) - len(mode))  # body corners slide forward
        kin = classify_contacts(snap)
        sol = solve_mode(snap, kin, mode)
        c, c0 = sol.Z_tau[ALPHA], sol.z_0[ALPHA]
        t = sol.n_tau
        if t == 0:  # no toe on the ground: the model's prediction without actuation
            self._last_prediction = float(c0)
            return Command(tau, float(c0), f"model{self.model} " + _label(layout.contact_names, mode), 1, 0)
        # equalities only: the admissible-torque subspace, plus the task row (body normal force >= min)
        task_rows = HPolytope.from_arrays(
            sol.task_domain.N[sol.domain.N.shape[0] :],
            sol.task_domain.e[sol.domain.N.shape[0] :],
            sol.domain.A_eq,
            sol.domain.b_eq,
        )
        x = _lp_max(c, task_rows, t, p.torque_limit_Nm)
        if x is None:  # threshold unreachable: drop it
            x = _lp_max(
                c,
                HPolytope.from_arrays(np.zeros((0, task_rows.dim)), np.zeros(0), task_rows.A_eq, task_rows.b_eq),
                t,
                p.torque_limit_Nm,
            )
        if x is None:
            self._last_prediction = float("nan")
            return Command(tau, float("nan"), "blind model infeasible")
        tau[list(layout.active_legs)] = x[:t]
        pred = float(c @ x[:t] + c0)
        self._last_prediction = pred
        return Command(tau, pred, f"model{self.model} " + _label(layout.contact_names, mode), 1, 1)
