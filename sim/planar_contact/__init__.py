"""Planar rigid-body contact-mode solver (Greenfield, Saranli, Rizzi; paper 003).

Enumerates every kinematically feasible contact mode of a planar system with Coulomb point contacts,
solves each mode in closed form (SVD), describes its admissible torques as polytopes (LP + Fourier–Motzkin),
and detects ambiguity within and between modes.
"""

from .analysis import ConsistentMode, ContactAnalysis, ModeAnalysis, analyse, modes_consistent_with
from .mode_solution import ModeSolution, RankCase, solve_mode
from .modes import classify_contacts, feasible_modes
from .polytope import HPolytope, chebyshev_ball, fourier_motzkin, remove_redundant
from .system import ContactModelError, ContactSnapshot, LinearConstraints

__all__ = [
    "ConsistentMode",
    "ContactAnalysis",
    "ContactModelError",
    "ContactSnapshot",
    "HPolytope",
    "LinearConstraints",
    "ModeAnalysis",
    "ModeSolution",
    "RankCase",
    "analyse",
    "chebyshev_ball",
    "classify_contacts",
    "feasible_modes",
    "fourier_motzkin",
    "modes_consistent_with",
    "remove_redundant",
    "solve_mode",
]
