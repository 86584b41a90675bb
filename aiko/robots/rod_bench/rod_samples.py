"""The rod's logged channels (``/sim/rod/centreline``, ``/sim/rod/contacts``, ``/sim/rod/base_wrench``), the
layout :mod:`aiko.robots.rod_bench.run` writes and the Foxglove rod views read, from a simulator state."""

from __future__ import annotations

from typing import Any

import numpy as np

from aiko.core.messages import XYZ, Channel, Message, integer, number, numbers, vectors
from aiko.robots.rod_bench.messages import STRAIN_AXES
from sim.cosserat import RodModel, RodState, kinematics
from sim.cosserat.dynamics import StepInfo

CENTRELINE = Channel("/sim/rod/centreline", Message(
    "aiko.rod.Centreline",
    "The simulated rod's shape at the log rate: its centreline at the strain nodes and the nodal strains.",
    {
        "t_s": number("simulation time", "s"),
        "centreline_m": vectors("centreline points at the strain nodes, base first, world frame", XYZ, "m"),
        "strain": vectors("nodal strains [kappa; eps], base first", STRAIN_AXES, "1/m, 1"),
    },
))  # fmt: skip
CONTACTS = Channel("/sim/rod/contacts", Message(
    "aiko.rod.Contacts",
    "The rod's contact forces and gaps at its contact points (after each logged step).",
    {
        "force_n": vectors("contact force on the rod at each contact point, world frame", XYZ, "N"),
        "gap_m": numbers("gap of each contact point (negative: penetration)", "m"),
    },
))  # fmt: skip
BASE_WRENCH = Channel("/sim/rod/base_wrench", Message(
    "aiko.rod.BaseWrench",
    "The wrench the base applies on the rod (a flange force sensor reads its negative), world frame.",
    {
        "moment_n_m": numbers("moment about the base point [x, y, z]", "N m"),
        "force_n": numbers("force [x, y, z]", "N"),
        "newton_iterations": integer("Newton iterations of the step"),
    },
))  # fmt: skip
ROD_STATE = Channel("/sim/rod/state", Message(
    "aiko.rod.State",
    "The HIL plant's true rod state (only with a [camera]: the camera films it after the run).",
    {
        "t_s": number("simulation time", "s"),
        "q": numbers("generalised coordinates [alpha; theta] (docs/cosserat.md)"),
    },
))  # fmt: skip
ROD_CHANNELS = {str(c): c for c in (CENTRELINE, CONTACTS, BASE_WRENCH, ROD_STATE)}
"""By topic: the HIL plant sends its records through a side log as plain topic names."""


def rod_payloads(model: RodModel, state: RodState, info: StepInfo | None) -> dict[str, dict[str, Any]]:
    """channel -> payload of one instant (contacts and base wrench only once a step has reported them)."""
    centreline = kinematics(model, state.q).p[model.grid.node_index]
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
