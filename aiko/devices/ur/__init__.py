"""Universal Robots UR3 over RTDE: the kinematic model, the RTDE protocol, a controller emulator for the ur_rtde
client, and our driver with its own safety limits (docs/ur3.md)."""
