"""The batched mode solver equals the one-mode-at-a-time reference."""

import itertools

import numpy as np
import pytest

from sim.planar_contact import examples as ex
from sim.planar_contact.batch import solve_modes
from sim.planar_contact.mode_solution import solve_mode
from sim.planar_contact.modes import classify_contacts


def sorted_rows(N, e):
    M = np.round(np.c_[N, e], 9)
    return M[np.lexsort(M.T[::-1])]


@pytest.mark.parametrize("name", ["two_link", "table", "bearing", "block", "painleve"])
def test_batch_equals_reference(name):
    snap = ex.EXAMPLES[name]().snapshot
    kin = classify_contacts(snap)
    modes = list(itertools.product(*kin.allowed))
    for m, sb in zip(modes, solve_modes(snap, kin, modes), strict=True):
        sr = solve_mode(snap, kin, m)
        assert (sr.rank, sr.n_w, sr.case) == (sb.rank, sb.n_w, sb.case)
        assert np.allclose(sr.Z_tau, sb.Z_tau, atol=1e-10) and np.allclose(sr.z_0, sb.z_0, atol=1e-10)
        t = sr.n_tau
        # τ-part of the domain rows is basis independent; compare as row sets
        assert np.allclose(sorted_rows(sr.domain.N[:, :t], sr.domain.e), sorted_rows(sb.domain.N[:, :t], sb.domain.e))
        # the null spaces span the same subspace
        if sr.n_w:
            P1 = sr.null_basis @ sr.null_basis.T
            P2 = sb.null_basis @ sb.null_basis.T
            assert np.allclose(P1, P2, atol=1e-9)
