"""Simulated motion capture: a backend's own link poses, sampled at the capture rate with noise, latency and
occlusion, behind the motion-capture interface (:mod:`aiko.core.mocap`) the real systems implement too — the Vicon
client in :mod:`aiko.devices.vicon`, OpenCV marker tracking in :mod:`aiko.devices.camera`. The experiment's
``[mocap]`` table chooses one (:func:`aiko.robots.aiko.mocap.create_mocap`, which imports each lazily).
"""
