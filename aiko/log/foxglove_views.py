"""Foxglove-schema messages derived from aiko's own records, so a log (or a live run) opens right in Foxglove.

aiko's channels stay JSON (the replay, compare and report tools read them). Beside them this module derives, from
the same records, messages in Foxglove's well-known schemas (the ``foxglove-sdk`` package's own definitions,
protobuf encoded):

=========================  ======================  ==========================================================
topic                      schema                  from
=========================  ======================  ==========================================================
``/foxglove/tf``           foxglove.FrameTransforms  every link's pose (``world`` → ``link1`` … ``linkN``)
``/foxglove/body``         foxglove.SceneUpdate    one capsule per link, in the link's frame (3D panel)
``/foxglove/joint_states`` foxglove.JointStates    measured joint angles and rates, ``h1`` … ``v1`` … (1-based)
``/foxglove/rod``          foxglove.SceneUpdate    the soft rod's centreline as a line strip
``/foxglove/rod/base_wrench`` foxglove.SceneUpdate the rod's base force as an arrow
=========================  ======================  ==========================================================

Link poses come from the simulator's ``/sim/link_poses`` where a backend writes them; otherwise (HIL, hardware) from
the measured joint angles placed at the last motion-capture pose of the tracked link, by the body-shape function the
run hands over in a :class:`BodyDrawing` (for Aiko, ``aiko.robots.aiko.shape.body_drawing``): the log knows no robot.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

TF_TOPIC = "/foxglove/tf"
BODY_TOPIC = "/foxglove/body"
JOINT_STATES_TOPIC = "/foxglove/joint_states"
ROD_TOPIC = "/foxglove/rod"
ROD_WRENCH_TOPIC = "/foxglove/rod/base_wrench"
WORLD_FRAME = "world"
BODY_PERIOD_NS = 50_000_000
"""Body poses from joint angles at most every 50 ms of run time (20 Hz): enough to watch, cheap to write."""
_LINK_COLOR = (0.95, 0.55, 0.1, 1.0)
_ROD_COLOR = (0.2, 0.5, 0.95, 1.0)


class FoxgloveUnavailable(RuntimeError):
    pass


BodyShapeFunction = Callable[
    [np.ndarray, np.ndarray, int, np.ndarray | None, np.ndarray | None], tuple[np.ndarray, np.ndarray]
]
"""``(angle_h_rad, angle_v_rad, tracked_link, tracked_position_m, tracked_quaternion_wxyz) -> (positions_m (n, 3),
quaternions_wxyz (n, 4))``: every link's pose from the joint angles, the tracked link (1-based) at its measured pose
(at the origin when it is None)."""


@dataclass(frozen=True)
class BodyDrawing:
    """What the views need to draw a snake robot, as data handed over by the run: link sizes, and the body shape
    from joint angles (None: the body is drawn only from the link poses a simulator logs)."""

    n_joints: int
    link_length_m: float
    link_radius_m: float
    shape_from_joints: BodyShapeFunction | None = None


def foxglove_messages_module() -> Any:
    """``foxglove.messages``, or a one-line error saying how to install it."""
    try:
        import foxglove.messages as messages
    except ImportError:
        raise FoxgloveUnavailable(
            "the foxglove-sdk package is missing: pip install foxglove-sdk (a dependency of aiko-stack)"
        ) from None
    return messages


def _timestamp(m: Any, epoch_ns: int) -> Any:
    return m.Timestamp(sec=int(epoch_ns // 1_000_000_000), nsec=int(epoch_ns % 1_000_000_000))


def _quat(m: Any, wxyz: Any) -> Any:
    w, x, y, z = (float(v) for v in wxyz)
    return m.Quaternion(x=x, y=y, z=z, w=w)


def _yaw_wxyz(theta: float) -> tuple[float, float, float, float]:
    return (math.cos(theta / 2), 0.0, 0.0, math.sin(theta / 2))


class FoxgloveViews:
    """Turns aiko records into Foxglove messages: ``messages(topic, epoch_ns, payload) -> [(topic, message)]``.

    ``body`` sizes the link capsules and lets joint angles give the body shape (unless ``body_from_joints`` is
    False: a simulator that logs its link poses); without it only simulator poses and the rod are shown. Keeps a
    little state (the last tracked-link pose, the last body time), so one instance serves one run, fed in time
    order from one thread.
    """

    def __init__(
        self, body: BodyDrawing | None = None, tracked_link: int = 6, *, body_from_joints: bool = True
    ) -> None:
        self.m = foxglove_messages_module()
        self.body = body
        self.tracked_link = tracked_link
        self._tracked_pose: tuple[np.ndarray, np.ndarray] | None = None
        self._sim_poses = not body_from_joints  # True once a simulator's own poses arrive
        self._last_body_ns: int | None = None
        self.errors = 0

    def messages(self, topic: str, epoch_ns: int, payload: dict[str, Any]) -> list[tuple[str, Any]]:
        try:
            if topic == "/sim/link_poses":
                return self._sim_link_poses(epoch_ns, payload)
            if topic == "/joint_feedback":
                return self._joint_feedback(epoch_ns, payload)
            if topic == "/mocap":
                self._mocap(payload)
            elif topic == "/sim/rod/centreline":
                return self._rod(epoch_ns, payload)
            elif topic == "/sim/rod/base_wrench":
                return self._wrench(epoch_ns, payload)
        except (KeyError, TypeError, ValueError, IndexError) as exc:  # a view is a convenience: never fail a run
            self.errors += 1
            if self.errors == 1:
                log.warning("no Foxglove view of %s: %s", topic, exc)
        return []

    # -- the snake
    def _mocap(self, payload: dict[str, Any]) -> None:
        names = list(payload.get("names") or [])
        name = f"link{self.tracked_link}"
        if name not in names:
            return
        i = names.index(name)
        p = np.asarray(payload["position_m"], dtype=float).reshape(-1, 3)[i]
        q = np.asarray(payload["quaternion_wxyz"], dtype=float).reshape(-1, 4)[i]
        occluded = payload.get("occluded")
        if (occluded is not None and bool(np.asarray(occluded).ravel()[i])) or not np.isfinite([*p, *q]).all():
            return
        self._tracked_pose = (p, q)

    def _joint_feedback(self, epoch_ns: int, payload: dict[str, Any]) -> list[tuple[str, Any]]:
        m = self.m
        h, v = payload["angle_h_rad"], payload["angle_v_rad"]
        rh, rv = payload.get("rate_h_rad_s", [0.0] * len(h)), payload.get("rate_v_rad_s", [0.0] * len(v))
        joints = [
            m.JointState(name=f"{axis}{i + 1}", position=_num(a), velocity=_num(r))
            for axis, angles, rates in (("h", h, rh), ("v", v, rv))
            for i, (a, r) in enumerate(zip(angles, rates, strict=False))
        ]
        states = m.JointStates(timestamp=_timestamp(m, epoch_ns), joints=joints)
        out: list[tuple[str, Any]] = [(JOINT_STATES_TOPIC, states)]
        body = self.body
        if body is None or body.shape_from_joints is None or self._sim_poses or len(h) != body.n_joints:
            return out
        if self._last_body_ns is not None and epoch_ns - self._last_body_ns < BODY_PERIOD_NS:
            return out
        if not (np.isfinite(np.asarray(h, dtype=float)).all() and np.isfinite(np.asarray(v, dtype=float)).all()):
            return out
        self._last_body_ns = epoch_ns
        p, q = self._tracked_pose if self._tracked_pose is not None else (None, None)
        h_rad, v_rad = np.asarray(h, float), np.asarray(v, float)
        positions, quaternions = body.shape_from_joints(h_rad, v_rad, self.tracked_link, p, q)
        return out + self._body(epoch_ns, positions, quaternions, along_x=False)

    def _sim_link_poses(self, epoch_ns: int, payload: dict[str, Any]) -> list[tuple[str, Any]]:
        self._sim_poses = True
        if "quaternion_wxyz" in payload:  # sim.snake3d: link frames with the centre line along e_z
            positions = np.asarray(payload["position_m"], dtype=float).reshape(-1, 3)
            return self._body(epoch_ns, positions, np.asarray(payload["quaternion_wxyz"], float), along_x=False)
        x, y = np.asarray(payload["x_m"], float), np.asarray(payload["y_m"], float)  # planar: along the heading
        positions = np.column_stack([x, y, np.zeros_like(x)])
        quats = np.array([_yaw_wxyz(t) for t in payload["theta_rad"]])
        return self._body(epoch_ns, positions, quats, along_x=True)

    def _body(self, epoch_ns: int, positions: np.ndarray, quats: np.ndarray, along_x: bool) -> list[tuple[str, Any]]:
        m = self.m
        stamp = _timestamp(m, epoch_ns)
        transforms = [
            m.FrameTransform(
                timestamp=stamp,
                parent_frame_id=WORLD_FRAME,
                child_frame_id=f"link{i + 1}",
                translation=m.Vector3(x=float(p[0]), y=float(p[1]), z=float(p[2])),
                rotation=_quat(m, q),
            )
            for i, (p, q) in enumerate(zip(positions, quats, strict=True))
        ]
        if self.body is not None:
            length, diameter = float(self.body.link_length_m), float(self.body.link_radius_m)
        else:  # from the spacing of the link centres
            gaps = np.linalg.norm(np.diff(positions, axis=0), axis=1)
            length = float(np.median(gaps)) if gaps.size else 0.1
            diameter = 0.43 * length
        axis = m.Quaternion(x=0.0, y=math.sqrt(0.5), z=0.0, w=math.sqrt(0.5)) if along_x else m.Quaternion(w=1.0)
        half = max(length - diameter, 0.0) / 2
        color = m.Color(r=_LINK_COLOR[0], g=_LINK_COLOR[1], b=_LINK_COLOR[2], a=_LINK_COLOR[3])

        def at(offset: float) -> Any:
            point = m.Vector3(x=offset, y=0.0, z=0.0) if along_x else m.Vector3(x=0.0, y=0.0, z=offset)
            return m.Pose(position=point, orientation=axis)

        entities = [
            m.SceneEntity(
                timestamp=stamp,
                frame_id=f"link{i + 1}",
                id=f"link{i + 1}",
                frame_locked=True,
                cylinders=[
                    m.CylinderPrimitive(
                        pose=at(0.0),
                        size=m.Vector3(x=diameter, y=diameter, z=2 * half),
                        bottom_scale=1.0,
                        top_scale=1.0,
                        color=color,
                    )
                ],
                spheres=[
                    m.SpherePrimitive(
                        pose=at(s * half), size=m.Vector3(x=diameter, y=diameter, z=diameter), color=color
                    )
                    for s in (-1.0, 1.0)
                ],
            )  # fmt: skip
            for i in range(len(positions))
        ]
        return [(TF_TOPIC, m.FrameTransforms(transforms=transforms)), (BODY_TOPIC, m.SceneUpdate(entities=entities))]

    # -- the rod
    def _rod(self, epoch_ns: int, payload: dict[str, Any]) -> list[tuple[str, Any]]:
        m = self.m
        points = np.asarray(payload["centreline_m"], dtype=float).reshape(-1, 3)
        line = m.LinePrimitive(
            type=m.LinePrimitiveLineType.LineStrip,
            pose=m.Pose(position=m.Vector3(x=0.0, y=0.0, z=0.0), orientation=m.Quaternion(w=1.0)),
            thickness=4.0,
            scale_invariant=True,
            points=[m.Point3(x=float(p[0]), y=float(p[1]), z=float(p[2])) for p in points],
            color=m.Color(r=_ROD_COLOR[0], g=_ROD_COLOR[1], b=_ROD_COLOR[2], a=_ROD_COLOR[3]),
        )
        entity = m.SceneEntity(timestamp=_timestamp(m, epoch_ns), frame_id=WORLD_FRAME, id="rod", lines=[line])
        return [(ROD_TOPIC, m.SceneUpdate(entities=[entity]))]

    def _wrench(self, epoch_ns: int, payload: dict[str, Any]) -> list[tuple[str, Any]]:
        """The base force as an arrow at the origin (1 cm per newton); the numbers stay on the JSON channel."""
        m = self.m
        force = np.asarray(payload["force_n"], dtype=float).reshape(3)
        magnitude = float(np.linalg.norm(force))
        if not math.isfinite(magnitude) or magnitude < 1e-12:
            return []
        q = _rotation_x_to(force / magnitude)
        arrow = m.ArrowPrimitive(
            pose=m.Pose(position=m.Vector3(x=0.0, y=0.0, z=0.0), orientation=_quat(m, q)),
            shaft_length=0.01 * magnitude,
            shaft_diameter=0.004,
            head_length=0.01,
            head_diameter=0.01,
            color=m.Color(r=0.9, g=0.1, b=0.1, a=1.0),
        )
        entity = m.SceneEntity(timestamp=_timestamp(m, epoch_ns), frame_id=WORLD_FRAME, id="base_force", arrows=[arrow])
        return [(ROD_WRENCH_TOPIC, m.SceneUpdate(entities=[entity]))]


def _num(value: Any) -> float:
    return float("nan") if value is None else float(value)


def _rotation_x_to(direction: np.ndarray) -> tuple[float, float, float, float]:
    """Unit quaternion (w, x, y, z) turning +x onto the unit vector ``direction``."""
    x = np.array([1.0, 0.0, 0.0])
    c = float(np.dot(x, direction))
    if c < -1 + 1e-9:
        return (0.0, 0.0, 0.0, 1.0)
    axis = np.cross(x, direction)
    w = 1.0 + c
    norm = math.sqrt(w * w + float(axis @ axis))
    return (w / norm, *(float(a) / norm for a in axis))


def views_or_none(
    body: BodyDrawing | None, tracked_link: int = 6, *, body_from_joints: bool = True
) -> FoxgloveViews | None:
    """The Foxglove-schema views of a run's log (3D body, joint states, rod), or None (and a warning) without
    foxglove-sdk: a log without them is still a complete log."""
    try:
        return FoxgloveViews(body, tracked_link, body_from_joints=body_from_joints)
    except FoxgloveUnavailable as exc:
        log.warning("%s; the log has no Foxglove 3D channels", exc)
        return None
