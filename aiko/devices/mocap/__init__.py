"""Motion capture behind one interface: simulated (from a backend's link poses), OpenCV markers, Vicon.

Sources are imported lazily by :func:`aiko.robots.aiko.mocap.create_mocap`, so OpenCV or the Vicon SDK load only when
an experiment uses them.
"""

from aiko.devices.mocap.base import MOCAP_TOPIC, MocapEvent, MocapSample, MocapTask, MotionCapture, occluded_sample

__all__ = ["MOCAP_TOPIC", "MocapEvent", "MocapSample", "MocapTask", "MotionCapture", "occluded_sample"]
