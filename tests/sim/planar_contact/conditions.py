"""Independent statement of Tables I–II, used by the tests to judge the solver's output."""

import numpy as np


def contact_violation(snap, mode, z, tol=1e-7):
    """Largest violation of Tables I–II for mode letters at z = [q̈; f] (velocities as in the snapshot)."""
    n = snap.n_q
    qdd, f = z[:n], z[n:]
    xdd = snap.J @ qdd + snap.Jdot_qdot
    thr = snap.thresholds()
    v = snap.contact_velocity
    worst = 0.0
    for i, c in enumerate(mode):
        an, at, fn, ft, mu = xdd[2 * i], xdd[2 * i + 1], f[2 * i], f[2 * i + 1], snap.mu[i]
        n_zero, t_zero = abs(v[2 * i]) <= thr[2 * i], abs(v[2 * i + 1]) <= thr[2 * i + 1]
        if c == "S":
            viol = [abs(fn), abs(ft)] + ([max(0.0, -an)] if n_zero else [])
        else:
            viol = [abs(an), max(0.0, -fn)]
            if c == "F":
                viol += [abs(at), max(0.0, abs(ft) - mu * fn)]
            elif c == "R":
                viol += [abs(ft + mu * fn)] + ([max(0.0, -at)] if t_zero else [])
            else:
                viol += [abs(ft - mu * fn)] + ([max(0.0, at)] if t_zero else [])
        worst = max(worst, *viol)
    return worst


def dynamics_residual(snap, tau, z):
    n = snap.n_q
    return float(np.abs(snap.M @ z[:n] + snap.bias - snap.S @ tau - snap.J.T @ z[n:]).max())
