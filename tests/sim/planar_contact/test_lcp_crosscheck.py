"""Every solution of the acceleration-level frictional LCP (sim.lcp) belongs to a mode the solver reports."""

import numpy as np
import pytest

from sim.lcp import solve_lcp
from sim.planar_contact import examples as ex
from sim.planar_contact import modes_consistent_with


def lcp_solution(snap, tau, method="lemke"):
    """Pfeiffer–Glocker style LCP in contact forces; returns z = [q̈; f] or None.

    Stationary contact: unknowns (f_n, β+, β−, λ), f_t = β+ − β−, rows ẍ_n ⊥ f_n, λ + ẍ_t ⊥ β+,
    λ − ẍ_t ⊥ β−, μ f_n − β+ − β− ⊥ λ. Sliding contact: f_n only, f_t = −sign(ẋ_t) μ f_n, ẍ_n ⊥ f_n.
    """
    Minv = np.linalg.inv(snap.M)
    W = snap.J @ Minv @ snap.J.T
    a = snap.J @ Minv @ (snap.S @ tau - snap.bias) + snap.Jdot_qdot
    k = snap.n_contacts
    v = snap.contact_velocity
    cols = []  # map LCP force unknowns y to f = D y
    layout = []
    for i in range(k):
        if abs(v[2 * i + 1]) <= 1e-9:
            layout.append(("stick", len(cols)))
            for d in ((1, 0), (0, 1), (0, -1), (0, 0)):
                col = np.zeros(2 * k)
                col[2 * i], col[2 * i + 1] = d
                cols.append(col)
        else:
            layout.append(("slide", len(cols)))
            col = np.zeros(2 * k)
            col[2 * i], col[2 * i + 1] = 1.0, -np.sign(v[2 * i + 1]) * snap.mu[i]
            cols.append(col)
    D = np.column_stack(cols)
    m = D.shape[1]
    Mlcp, qlcp = np.zeros((m, m)), np.zeros(m)
    WD = W @ D
    for i, (kind, j) in enumerate(layout):
        Mlcp[j], qlcp[j] = WD[2 * i], a[2 * i]
        if kind == "stick":
            Mlcp[j + 1], qlcp[j + 1] = WD[2 * i + 1], a[2 * i + 1]
            Mlcp[j + 1, j + 3] += 1.0
            Mlcp[j + 2], qlcp[j + 2] = -WD[2 * i + 1], -a[2 * i + 1]
            Mlcp[j + 2, j + 3] += 1.0
            Mlcp[j + 3, j], Mlcp[j + 3, j + 1], Mlcp[j + 3, j + 2] = snap.mu[i], -1.0, -1.0
    res = solve_lcp(Mlcp, qlcp, method=method)
    if not res.success:
        return None
    f = D @ res.z
    qdd = Minv @ (snap.S @ tau - snap.bias + snap.J.T @ f)
    return np.concatenate([qdd, f])


def belongs_to_reported_mode(snap, tau, z):
    for c in modes_consistent_with(snap, tau):
        dz = z - c.z_at_tau
        if c.w_domain is None:
            if np.allclose(dz, 0.0, atol=1e-7 * (1 + np.abs(z).max())):
                return True
            continue
        w, *_ = np.linalg.lstsq(c.null_basis, dz, rcond=None)
        if np.allclose(c.null_basis @ w, dz, atol=1e-7 * (1 + np.abs(z).max())) and c.w_domain.contains(w, 1e-7):
            return True
    return False


CASES = [
    ("block", lambda r: ex.block(mu=r.uniform(0.1, 1.0), push_N=r.uniform(-12, 12))),
    ("block_sliding", lambda r: ex.block(mu=r.uniform(0.1, 1.0), push_N=r.uniform(-12, 12), speed_m_s=0.4)),
    ("table", lambda r: ex.table(mu=r.uniform(0.1, 1.0), push_N=r.uniform(-20, 20))),
    ("two_link", lambda r: ex.two_link(mu=r.uniform(0.2, 1.5), elbow_torque_Nm=r.uniform(-8, 8))),
    ("painleve", lambda r: ex.painleve(mu=r.uniform(0.05, 1.2), moment_Nm=r.uniform(-3, 3))),
]


@pytest.mark.parametrize("name,make", CASES, ids=[c[0] for c in CASES])
def test_every_lcp_solution_belongs_to_a_reported_mode(name, make):
    rng = np.random.default_rng(sum(map(ord, name)))
    solved = 0
    for _ in range(12):
        e = make(rng)
        for method in ("lemke", "enumerate"):  # two solvers: where solutions are many they may differ
            z = lcp_solution(e.snapshot, e.tau, method)
            if z is None:
                continue
            solved += 1
            assert belongs_to_reported_mode(e.snapshot, e.tau, z), (name, method, e.parameters, e.tau)
    assert solved >= 12


def test_lcp_and_mode_solver_agree_on_painleve_inconsistency():
    e = ex.painleve(mu=1.5)  # above 4/3 at tanθ = 2: no consistent mode, and no LCP solution either
    assert modes_consistent_with(e.snapshot, e.tau) == []
    assert lcp_solution(e.snapshot, e.tau) is None
