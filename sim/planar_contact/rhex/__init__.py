"""Planar RHex self-righting (paper 003, IV): rigid massless-hip model, maximal-thrust and blind
controllers, and the compliant benchmark simulator they are judged on."""

from .compliant import CompliantRHex, CompliantState
from .controllers import BlindController, Command, MaximalThrustController
from .flip import FlipResult, run_flip
from .params import RHexParameters
from .rigid import RigidObservation, rigid_snapshot

__all__ = [
    "BlindController",
    "Command",
    "CompliantRHex",
    "CompliantState",
    "FlipResult",
    "MaximalThrustController",
    "RHexParameters",
    "RigidObservation",
    "rigid_snapshot",
    "run_flip",
]
