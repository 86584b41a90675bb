"""Frames → red-marker tracker → marker world positions → strain observer (paper 004, eq. 61–63) → strains at the
control points (the strain nodes of the observer's rod model).

The observer needs the base pose (the arm's flange: known from the robot, or fixed on a bench) and a rod model
that lists the markers' arc lengths as extra sweep points (:func:`observer_model`). Markers the tracker lost in a
frame are left out of that frame's constraints (the observer runs on the visible ones, at least ``min_markers``);
each frame starts Newton from the previous frame's strains.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from aiko.core.errors import ConfigError
from aiko.devices.camera.red_markers import MarkerObservation, RedMarkerTracker
from aiko.devices.camera.source import Frame
from sim.cosserat import RodDescription, build_model
from sim.cosserat.forces import centreline as sim_centreline
from sim.cosserat.model import RodModel
from sim.cosserat.newton import ConvergenceError
from sim.cosserat.observer import observe_strains


@dataclass(frozen=True)
class StrainEstimate:
    t_ns: int
    markers: MarkerObservation
    control_x_m: np.ndarray  # (n+1,) arc lengths of the strain nodes
    strain_nodes: np.ndarray | None  # (n+1, 6) [κ; ε] at the strain nodes; None when the observer could not run
    marker_forces_n: np.ndarray | None  # (k_visible, 3) constraint forces on the visible markers
    iterations: int
    note: str = ""  # why strain_nodes is None
    centreline_m: np.ndarray | None = None  # (n+1, 3) the observer's rod at the strain nodes (world), for viewers
    base_alpha: np.ndarray | None = None  # (6,) the base pose the observer clamped the rod at [rot. vector; position]


def observer_model(rod: RodDescription, n_sections: int, marker_arc_m, gravity_m_s2=(0.0, 0.0, -9.81)) -> RodModel:
    """The observer's virtual rod: same rod, clamped base, no contact (contacts show up as marker forces)."""
    return build_model(
        rod, n_sections, gravity_m_s2=tuple(gravity_m_s2), extra_points_m=tuple(float(x) for x in marker_arc_m)
    )


class StrainPipeline:
    """``base_alpha``: the base pose [rotation vector; position] (6,), or a function of the frame time in s."""

    def __init__(
        self,
        tracker: RedMarkerTracker,
        model: RodModel,
        marker_arc_m,
        base_alpha: np.ndarray | Callable[[float], np.ndarray],
        *,
        min_markers: int = 3,
        marker_compliance_m_per_n: float = 0.0,
    ) -> None:
        self.tracker = tracker
        self.model = model
        self.marker_arc = np.asarray(marker_arc_m, dtype=float)
        if tracker.to_world is None:
            raise ConfigError("strain pipeline: the tracker needs a calibration (to_world) to give metric markers")
        if len(self.marker_arc) != tracker.settings.n_markers:
            raise ConfigError(
                f"strain pipeline: {len(self.marker_arc)} marker arc lengths for {tracker.settings.n_markers} markers"
            )
        if callable(base_alpha):
            self._alpha = base_alpha
        else:
            fixed = np.asarray(base_alpha, dtype=float)
            if fixed.shape != (6,):
                raise ConfigError(
                    f"strain pipeline: base_alpha must be (6,) [rotation vector; position], got {fixed.shape}"
                )
            self._alpha = lambda _t: fixed
        self.min_markers = int(min_markers)
        self.compliance = float(marker_compliance_m_per_n)
        self._q: np.ndarray | None = None
        self._t0_ns: int | None = None

    def process(self, frame: Frame) -> StrainEstimate:
        return self.observe(*self.track(frame))

    def track(self, frame: Frame) -> tuple[MarkerObservation, np.ndarray]:
        """The frame's markers, and the base pose at its time: the first half of `process`. Tracking and observing
        keep state from frame to frame (the tracker its lost markers, the observer its warm start), so each half
        must see the frames in order; they may run in two threads (one each), one frame apart."""
        if self._t0_ns is None:
            self._t0_ns = frame.t_ns
        t_s = (frame.t_ns - self._t0_ns) * 1e-9
        alpha = np.asarray(self._alpha(t_s), dtype=float)
        hint = self.tracker.to_world.to_pixels(alpha[3:6][None])[0]
        return self.tracker.process(frame.image, frame.t_ns, base_hint_px=hint), alpha

    def observe(self, obs: MarkerObservation, alpha: np.ndarray) -> StrainEstimate:
        """The observer on one frame's markers (usable without images, e.g. on recorded marker tracks)."""
        control_x = self.model.grid.x_nodes
        seen = obs.visible & np.all(np.isfinite(obs.world_m), axis=1)
        if seen.sum() < self.min_markers:
            note = f"{int(seen.sum())} markers seen"
            return StrainEstimate(obs.t_ns, obs, control_x, None, None, 0, note, base_alpha=alpha)
        try:
            result = observe_strains(
                self.model, alpha, self.marker_arc[seen], obs.world_m[seen], self._q, self.compliance
            )
        except ConvergenceError as exc:
            self._q = None
            return StrainEstimate(obs.t_ns, obs, control_x, None, None, 0, f"observer: {exc}", base_alpha=alpha)
        self._q = result.q
        centreline = sim_centreline(self.model, result.q)
        return StrainEstimate(
            obs.t_ns, obs, control_x, result.strain_nodes, result.marker_forces_n, result.iterations,
            centreline_m=centreline, base_alpha=alpha,
        )  # fmt: skip

    def run(self, frames: Iterable[Frame]) -> Iterator[StrainEstimate]:
        for frame in frames:
            yield self.process(frame)
