"""``--backend sim``: the Cosserat simulator driven directly by the flange targets (no devices).

Each target says where the base must be at ``target_t_s``; between targets the base moves linearly (the stepper's
waypoints), so streaming the experiment's ``[base_motion]`` reproduces ``sim.cosserat.simulate`` on that file. The
rod's channels are logged at the experiment's log rate, as ``aiko rod run`` logs them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from aiko.core.interfaces import Backend
from aiko.robots.rod_bench.backends import register_bench_backend
from aiko.robots.rod_bench.context import BenchContext
from aiko.robots.rod_bench.messages import BenchObservation, FlangeTarget
from aiko.robots.rod_bench.mount import Mount
from aiko.robots.rod_bench.rod_samples import rod_payloads
from aiko.robots.rod_bench.rod_stepper import RodStepper


class BenchSimBackend(Backend[BenchContext, FlangeTarget, BenchObservation]):
    name = "sim"

    def __init__(self) -> None:
        self.ctx: BenchContext | None = None
        self.rod: RodStepper | None = None
        self.mount: Mount | None = None
        self._last_alpha = np.zeros(6)
        self._last_t_s = 0.0
        self._speed = np.zeros(6)

    def configure(self, ctx: BenchContext) -> None:
        self.ctx = ctx
        scenario = ctx.experiment.scenario
        every = max(1, int(round(1.0 / (ctx.experiment.log_rate_hz * scenario.dt_s))))
        self.rod = RodStepper(scenario, self._record, every)
        self.rod.prime()  # kernels loaded before the run's clock starts, not inside its first steps
        self.mount = Mount.from_settings(ctx.experiment.ur3)
        self._last_alpha = self.rod.alpha

    def _record(self, rod: RodStepper) -> None:
        assert self.ctx is not None
        t_ns = self.ctx.clock.stamp_ns(rod.state.t_s)
        for channel, payload in rod_payloads(rod.model, rod.state, rod.info).items():
            self.ctx.recorder.record(channel, t_ns, payload)

    def activate(self) -> None:
        assert self.rod is not None
        self.rod.emit()  # t = 0

    def write(self, command: FlangeTarget) -> None:
        assert self.rod is not None
        self.rod.add_waypoint(command.target_t_s, command.base_alpha)

    def advance_to(self, t_s: float) -> None:
        assert self.rod is not None
        self.rod.advance_to(t_s)
        alpha = self.rod.alpha
        if self.rod.state.t_s > self._last_t_s:
            self._speed = (alpha - self._last_alpha) / (self.rod.state.t_s - self._last_t_s)
        self._last_alpha, self._last_t_s = alpha, self.rod.state.t_s

    def read(self) -> BenchObservation:
        assert self.rod is not None and self.mount is not None
        alpha = self.rod.alpha
        wrench = np.zeros(6) if self.rod.info is None else np.asarray(self.rod.info.base_wrench, dtype=float)
        flange_speed = np.concatenate(
            [self.mount.ur_base_from_world(self._speed[3:6]), self.mount.ur_base_from_world(self._speed[0:3])]
        )
        return BenchObservation(self.rod.state.t_s, alpha, self.mount.flange_pose(alpha), flange_speed, wrench)

    def deactivate(self) -> None:
        pass

    def summary(self) -> dict[str, Any]:
        return {} if self.rod is None else self.rod.summary()


register_bench_backend(
    "sim", BenchSimBackend, "the Cosserat simulator driven directly by the base trajectory", wall_clock_only=False
)
