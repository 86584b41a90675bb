"""A deterministic plant with link poses for replay/compare tests until the physics simulators land.

The joints follow the kinematic backend's first-order lag; the links form a planar chain from those angles and
the chain's base crawls by an amount that depends on the whole joint history (so a replay that drifts in time
or in value shows up in the poses, not only in the joint angles).
"""

import numpy as np

from aiko.robots.aiko.backends.kinematic import KinematicBackend


class ChainBackend(KinematicBackend):
    name = "kinematic"  # reads the [backend.kinematic] table

    def configure(self, ctx):
        super().configure(ctx)
        self._base = np.zeros(2)
        self._heading = 0.0
        self._previous = self._angle.copy()

    def advance_to(self, t_s):
        super().advance_to(t_s)
        delta = self._angle - self._previous
        self._previous = self._angle.copy()
        self._base += 0.01 * np.array([np.abs(delta[0]).sum(), 0.3 * delta[0].sum()])
        self._heading += 0.02 * delta[0].sum()

    def link_poses(self):
        n = self.robot.n_links
        length = self.robot.link_length_m
        headings = self._heading + np.concatenate([[0.0], np.cumsum(self._angle[0])])
        positions = np.zeros((n, 3))
        point = self._base.copy()
        for i in range(n):
            direction = np.array([np.cos(headings[i]), np.sin(headings[i])])
            positions[i, :2] = point + 0.5 * length * direction
            point = point + length * direction
        positions[:, 2] = self.robot.link_radius_m
        quats = np.zeros((n, 4))
        quats[:, 0] = np.cos(headings / 2)
        quats[:, 3] = np.sin(headings / 2)
        return positions, quats
