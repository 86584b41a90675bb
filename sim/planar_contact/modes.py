"""Contact modes, Table III kinematic feasibility and the global acceleration LP (paper 003, III-B, III-F)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog

from .system import ContactModelError, ContactSnapshot

MODE_LETTERS = ("F", "S", "L", "R")
Mode = tuple[str, ...]


def parse_mode(text: str | Mode, n_contacts: int) -> Mode:
    letters = tuple(text.replace(",", "").replace(" ", "").upper()) if isinstance(text, str) else tuple(text)
    if len(letters) != n_contacts or any(c not in MODE_LETTERS for c in letters):
        raise ContactModelError(f"mode {text!r} must have {n_contacts} letters from {''.join(MODE_LETTERS)}")
    return letters


@dataclass(frozen=True)
class ContactKinematics:
    """Per-contact velocity classification: which letters survive Table III, and which velocities count as 0."""

    allowed: tuple[tuple[str, ...], ...]
    normal_zero: np.ndarray  # (k,) bool
    tangential_zero: np.ndarray  # (k,) bool
    approaching: np.ndarray  # (k,) bool: ẋ_n < 0, an impact the rigid model cannot resolve


def classify_contacts(snap: ContactSnapshot) -> ContactKinematics:
    """Table III with velocity thresholds: |ẋ| <= threshold counts as zero (never eliminates modes)."""
    v = snap.contact_velocity
    thr = snap.thresholds()
    allowed, nz, tz, appr = [], [], [], []
    for i in range(snap.n_contacts):
        vn, vt, tn, tt = v[2 * i], v[2 * i + 1], thr[2 * i], thr[2 * i + 1]
        n_zero, t_zero = abs(vn) <= tn, abs(vt) <= tt
        approaching = vn < -tn
        if vn > tn:
            letters = ("S",)
        elif approaching:
            letters = ()
        elif t_zero:
            letters = MODE_LETTERS
        elif vt > 0:
            letters = ("S", "R")
        else:
            letters = ("S", "L")
        allowed.append(letters)
        nz.append(n_zero)
        tz.append(t_zero)
        appr.append(approaching)
    return ContactKinematics(tuple(allowed), np.array(nz), np.array(tz), np.array(appr))


def acceleration_rows(snap: ContactSnapshot, kin: ContactKinematics, mode: Mode):
    """Contact acceleration constraints of Tables I–II as rows on q̈.

    Returns (A_eq, b_eq, A_ge, b_ge) with A_eq q̈ = b_eq and A_ge q̈ >= b_ge; ẍ = J q̈ + J̇q̇.
    Inequalities exist only where the corresponding velocity counts as zero.
    """
    J, Jd = snap.J, snap.Jdot_qdot
    eq, ge = [], []
    for i, c in enumerate(mode):
        n_row, t_row = 2 * i, 2 * i + 1
        if c == "S":
            if kin.normal_zero[i]:
                ge.append((J[n_row], -Jd[n_row]))
        else:
            eq.append((J[n_row], -Jd[n_row]))
            if c == "F":
                eq.append((J[t_row], -Jd[t_row]))
            elif kin.tangential_zero[i]:
                sign = 1.0 if c == "R" else -1.0
                ge.append((sign * J[t_row], -sign * Jd[t_row]))
    n = snap.n_q
    A_eq = np.array([r for r, _ in eq]).reshape(-1, n)
    b_eq = np.array([b for _, b in eq])
    A_ge = np.array([r for r, _ in ge]).reshape(-1, n)
    b_ge = np.array([b for _, b in ge])
    return A_eq, b_eq, A_ge, b_ge


def kinematically_feasible(snap: ContactSnapshot, kin: ContactKinematics, mode: Mode) -> bool:
    """Global LP of III-F: a q̈ meeting all equalities and the S/L/R inequalities *strictly* must exist.

    Strictness (footnote 5: the zero-acceleration case belongs to F) is enforced with a slack s:
    maximise s <= 1 subject to A_ge q̈ >= b_ge + s |row|; feasible iff s > 0.
    """
    A_eq, b_eq, A_ge, b_ge = acceleration_rows(snap, kin, mode)
    n = snap.n_q
    if A_ge.shape[0] == 0:
        if A_eq.shape[0] == 0:
            return True
        sol, *_ = np.linalg.lstsq(A_eq, b_eq, rcond=None)
        return bool(np.linalg.norm(A_eq @ sol - b_eq) <= 1e-9 * (1.0 + np.linalg.norm(b_eq)))
    norms = np.linalg.norm(A_ge, axis=1)
    c = np.zeros(n + 1)
    c[-1] = -1.0
    A_ub = np.hstack([-A_ge, norms[:, None]])
    res = linprog(
        c,
        A_ub=A_ub,
        b_ub=-b_ge,
        A_eq=np.hstack([A_eq, np.zeros((A_eq.shape[0], 1))]) if A_eq.shape[0] else None,
        b_eq=b_eq if A_eq.shape[0] else None,
        bounds=[(None, None)] * n + [(None, 1.0)],
        method="highs",
    )
    return bool(res.status == 0 and -res.fun > 1e-9)


def feasible_modes(snap: ContactSnapshot, global_lp: bool = True) -> tuple[list[Mode], ContactKinematics]:
    """All kinematically feasible modes M_p (Table III, then the global LP unless disabled)."""
    kin = classify_contacts(snap)
    if any(kin.approaching):
        return [], kin
    modes = [tuple(m) for m in itertools.product(*kin.allowed)]
    if global_lp:
        modes = [m for m in modes if kinematically_feasible(snap, kin, m)]
    return modes, kin
