"""The rod's logged channels (``/sim/rod/centreline``, ``/sim/rod/contacts``, ``/sim/rod/base_wrench``), the
layout :mod:`aiko.robots.rod_bench.run` writes and the Foxglove rod views read, from a simulator state."""

from __future__ import annotations

from typing import Any

import numpy as np

from sim.cosserat import RodModel, RodState
from sim.cosserat.forces import centreline as sim_centreline
from sim.cosserat.step_problem import StepInfo

CENTRELINE = "/sim/rod/centreline"
CONTACTS = "/sim/rod/contacts"
BASE_WRENCH = "/sim/rod/base_wrench"
ROD_STATE = "/sim/rod/state"  # the HIL plant's true states q (only with a [camera]: the camera films them)


def rod_payloads(model: RodModel, state: RodState, info: StepInfo | None) -> dict[str, dict[str, Any]]:
    """channel -> payload of one instant (contacts and base wrench only once a step has reported them)."""
    centreline = sim_centreline(model, state.q)
    out: dict[str, dict[str, Any]] = {
        CENTRELINE: {
            "t_s": state.t_s,
            "centreline_m": centreline.tolist(),
            "strain": (state.q[6:].reshape(-1, 6) + model.xi_ref_nodes).tolist(),
        }
    }
    if info is not None:
        out[CONTACTS] = {"force_n": info.contact_force_n.tolist(), "gap_m": info.contact_gap_m.tolist()}
        out[BASE_WRENCH] = {
            "moment_n_m": np.asarray(info.base_wrench[0:3]).tolist(),
            "force_n": np.asarray(info.base_wrench[3:6]).tolist(),
            "newton_iterations": info.iterations,
        }
    return out
