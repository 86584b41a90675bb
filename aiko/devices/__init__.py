"""Devices: one package per device (vendor protocol, real driver, protocol emulator), never a robot."""
