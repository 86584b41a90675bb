"""Vicon DataStream (Tracker / Nexus, TCP port 801): the wire protocol and an emulated server for the real SDK client.

- :mod:`.protocol`: the ViconCGStream codec (packets and objects, from the SDK 1.11.0 headers);
- :mod:`.model`: subjects, segments, markers and the ``FrameSource`` a server serves;
- :mod:`.frames`: one frame's objects; :mod:`.impairments`: occlusion, dropouts, latency, restarts;
- :mod:`.server`: the threaded server (ClientPull, ClientPullPreFetch, ServerPush);
- :mod:`.synthetic`: closed-form test subjects; :mod:`.probe`: the real client, reporting JSON.

Generic: no robot code here (Aiko as a subject lives in the robot's package).
"""
