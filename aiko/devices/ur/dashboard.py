"""The dashboard server's command language (TCP 29999): one ASCII line in, one line out.

Replies as UR's "Dashboard Server" manuals for CB-series (3.x) and e-Series (5.x) give them, limited to the
commands ur_rtde's ``DashboardClient`` (``src/dashboard_client.cpp``) sends; the client compares several of
them literally ("Starting program", "Stopped", "Protective stop releasing", "Loading program: ...").
"""

from __future__ import annotations

from typing import Protocol

WELCOME = "Connected: Universal Robots Dashboard Server"

ROBOT_MODES = {3: "POWER_OFF", 5: "IDLE", 7: "RUNNING"}
SAFETY_MODES = {1: "NORMAL", 2: "REDUCED", 3: "PROTECTIVE_STOP", 9: "FAULT"}


class DashboardTarget(Protocol):
    """What the dashboard needs from the emulator (implemented by ``UR3Emulator``)."""

    robot_mode: int
    loaded_program: str
    polyscope_version: str
    serial_number: str
    model_name: str

    def safety_mode(self) -> int: ...
    def program_running(self) -> bool: ...
    def play(self) -> bool: ...
    def stop_program(self, reason: str) -> None: ...
    def unlock_protective_stop(self) -> tuple[bool, str]: ...
    def log(self, message: str) -> None: ...


def answer(target: DashboardTarget, line: str) -> tuple[str, bool]:
    """The reply to one command line, and whether the server closes the connection after it."""
    cmd = line.strip()
    low = cmd.lower()
    if low == "robotmode":
        return f"Robotmode: {ROBOT_MODES.get(target.robot_mode, 'RUNNING')}", False
    if low == "safetymode":
        return f"Safetymode: {SAFETY_MODES.get(target.safety_mode(), 'NORMAL')}", False
    if low == "safetystatus":
        return f"Safetystatus: {SAFETY_MODES.get(target.safety_mode(), 'NORMAL')}", False
    if low == "polyscopeversion":
        return target.polyscope_version, False
    if low == "is in remote control":
        return "true", False
    if low == "get serial number":
        return target.serial_number, False
    if low == "get robot model":
        return target.model_name, False
    if low == "running":
        return f"Program running: {'true' if target.program_running() else 'false'}", False
    if low == "programstate":
        state = "PLAYING" if target.program_running() else "STOPPED"
        return f"{state} {target.loaded_program or '<unnamed>'}", False
    if low.startswith("load "):
        target.loaded_program = cmd[5:].strip()
        return f"Loading program: {target.loaded_program}", False
    if low == "get loaded program":
        if not target.loaded_program:
            return "No program loaded", False
        return f"Loaded program: {target.loaded_program}", False
    if low == "play":
        if target.play():
            return "Starting program", False
        return "Failed to execute: play", False
    if low == "stop":
        target.stop_program("dashboard stop")
        return "Stopped", False
    if low == "pause":
        target.stop_program("dashboard pause")
        return "Pausing program", False
    if low == "unlock protective stop":
        ok, why = target.unlock_protective_stop()
        return ("Protective stop releasing" if ok else why), False
    if low == "close safety popup":
        return "closing safety popup", False
    if low == "close popup":
        return "closing popup", False
    if low.startswith("popup "):
        return "showing popup", False
    if low.startswith("addtolog "):
        target.log(cmd[9:])
        return "Added log message", False
    if low == "isprogramsaved":
        return f"true {target.loaded_program or '<unnamed>'}", False
    if low == "power on":
        target.robot_mode = 5
        return "Powering on", False
    if low == "power off":
        target.stop_program("power off")
        target.robot_mode = 3
        return "Powering off", False
    if low == "brake release":
        target.robot_mode = 7
        return "Brake releasing", False
    if low == "restart safety":
        return "Restarting safety", False
    if low.startswith("setuserrole "):
        return f"Setting user role: {cmd[12:].strip()}", False
    if low == "quit":
        return "Disconnected", True
    if low == "shutdown":
        return "Shutting down", True
    return f"could not understand: '{cmd}'", False
