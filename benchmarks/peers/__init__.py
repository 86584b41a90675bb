"""Peer simulators on the same work as ours: MuJoCo on the 3D Aiko model, PyElastica on the Cosserat rod.

Each module builds the peer's model from *our* model objects (so a parameter change cannot leave the two apart) and
offers ``run(...)`` functions that ``benchmarks/peers/compare.py`` times interleaved with our simulators.
"""
