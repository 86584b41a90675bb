"""Cosserat rod with piecewise-linear strain and smoothed frictional contact (paper 004).

Model/state split: `build_model(RodDescription, ...)` -> `RodModel`; `initial_state(model)` -> `RodState`;
`step(model, state, dt_s)` advances one implicit-Euler step; `solve_statics` finds equilibria.
`PointConstraint`s hold points along the rod (pins, clamps). Several rods with rod–rod contact:
`build_system(models, [PairContact(a, b, ...)])`, `initial_system_state`, `step_rods` (sim.cosserat.multirod).
"""

import sim.cosserat._fresh_kernels  # noqa: F401  (first: drops a stale numba cache before any kernel loads)
from sim.cosserat.constraints import PointConstraint
from sim.cosserat.dynamics import step
from sim.cosserat.forces import energy, kinematics, mass_matrix
from sim.cosserat.model import ContactSettings, RodModel, RodState, build_model, initial_state
from sim.cosserat.multirod import (
    PairContact,
    RodSystem,
    RodSystemState,
    build_system,
    initial_system_state,
    pair_contact_points,
    step_rods,
)
from sim.cosserat.newton import ConvergenceError, NewtonSettings
from sim.cosserat.observer import ObserverResult, observe_strains
from sim.cosserat.obstacles import CurvedTube, Cylinder, Plane
from sim.cosserat.rod import Core, Material, RodDescription, RodParameterError, uniform_rod
from sim.cosserat.scenario import BaseMotion, Scenario, SimulationResult, simulate
from sim.cosserat.slack import Smoothing
from sim.cosserat.statics import StaticsResult, solve_statics
from sim.cosserat.step_problem import NewtonIterate, StepInfo

__all__ = [
    "BaseMotion",
    "PairContact",
    "RodSystem",
    "RodSystemState",
    "build_system",
    "initial_system_state",
    "pair_contact_points",
    "step_rods",
    "ObserverResult",
    "Scenario",
    "SimulationResult",
    "StaticsResult",
    "observe_strains",
    "simulate",
    "solve_statics",
    "ContactSettings",
    "ConvergenceError",
    "Core",
    "CurvedTube",
    "Cylinder",
    "Material",
    "NewtonSettings",
    "Plane",
    "PointConstraint",
    "RodDescription",
    "RodModel",
    "RodParameterError",
    "RodState",
    "Smoothing",
    "NewtonIterate",
    "StepInfo",
    "build_model",
    "energy",
    "initial_state",
    "kinematics",
    "mass_matrix",
    "step",
    "uniform_rod",
]
