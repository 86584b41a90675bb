"""Aiko's backends: every way of running a gait implements :class:`aiko.robots.aiko.joints.JointInterface`.

Each module here registers itself in :mod:`aiko.core.registry` when imported (with the experiment-file sections it
owns); :func:`aiko.robots.aiko.plugins.load_plugins` imports them all. A new backend is one new module, with no
central list to edit.
"""
