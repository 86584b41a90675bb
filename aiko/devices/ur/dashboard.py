"""The dashboard server (TCP 29999): one ASCII line in, one line out.

Replies are the Dashboard Server's documented strings (UR's "Dashboard Server CB-Series / e-Series, port 29999"
articles), as UR's own client checks them (Universal_Robots_Client_Library, ``dashboard_client_implementation_g5.cpp``:
each command's reply pattern and the first CB3 / e-Series version that has it) and as ur_rtde 1.6.5's
``DashboardClient`` (``src/dashboard_client.cpp``) compares them. A command the emulated controller's version does
not have is answered as the server answers an unknown one, ``could not understand: '<line>'``.

Where the two clients disagree the documentation wins: ``isProgramSaved`` answers ``true <program>`` /
``false <program>`` (lower case, as documented and as UR's client parses it); ur_rtde 1.6.5 looks for "True" and so
reports False against a real controller and this one alike.

The emulator runs no PolyScope programs (``.urp``): ``load`` answers "Error while loading program"; ``play`` resumes
a program the dashboard paused and otherwise fails ("Failed to execute: play"), as with no program loaded.
"""

from __future__ import annotations

import socket
from typing import Protocol

WELCOME = "Connected: Universal Robots Dashboard Server"

ROBOT_MODES = {3: "POWER_OFF", 4: "POWER_ON", 5: "IDLE", 7: "RUNNING"}
SAFETY_MODES = {1: "NORMAL", 2: "REDUCED", 3: "PROTECTIVE_STOP", 9: "FAULT"}

# First controller version with each command, (CB3, e-Series), from UR's client library's command table.
_NEVER = (99, 0)
SINCE: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {
    "safetystatus": (_NEVER, (5, 4)),
    "is in remote control": (_NEVER, (5, 6)),
    "get serial number": ((3, 12), (5, 6)),
    "get robot model": ((3, 12), (5, 6)),
    "restart safety": ((3, 7), (5, 1)),
    "getuserrole": ((3, 1), (5, 0)),
    "setuserrole": ((3, 1), (5, 0)),
    "get operational mode": (_NEVER, (5, 6)),
}


class DashboardTarget(Protocol):
    """What the dashboard needs from the emulator (implemented by ``UR3Emulator``)."""

    robot_mode: int
    polyscope_version: str
    serial_number: str
    model_name: str
    version: tuple[int, int, int, int]

    def safety_mode(self) -> int: ...
    def program_state(self) -> str: ...
    def resume_program(self) -> bool: ...
    def pause_program(self) -> bool: ...
    def stop_program(self, reason: str) -> None: ...
    def unlock_protective_stop(self) -> tuple[bool, str]: ...
    def power(self, on: bool) -> bool: ...
    def release_brakes(self) -> bool: ...
    def restart_safety(self) -> None: ...
    def shutdown(self) -> None: ...
    def log(self, message: str) -> None: ...


def _has(target: DashboardTarget, command: str) -> bool:
    since = SINCE.get(command)
    if since is None:
        return True
    major, minor = target.version[:2]
    first = since[1] if major >= 5 else since[0]
    return (major, minor) >= first


def answer(target: DashboardTarget, line: str) -> tuple[str, bool]:
    """The reply to one command line, and whether the server closes the connection after it."""
    cmd = line.strip()
    low = cmd.lower()
    key = low.split(" ", 1)[0] if low.startswith(("setuserrole", "getuserrole")) else low
    if not _has(target, key):
        return f"could not understand: '{cmd}'", False
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
        return f"Program running: {'true' if target.program_state() == 'PLAYING' else 'false'}", False
    if low == "programstate":
        return f"{target.program_state()} <unnamed>", False
    if low.startswith("load "):
        program = cmd[5:].strip()
        target.log(f"load {program}: the emulator runs no PolyScope programs")
        return f"Error while loading program: {program}", False
    if low == "get loaded program":
        return "No program loaded", False
    if low == "play":
        return ("Starting program" if target.resume_program() else "Failed to execute: play"), False
    if low == "stop":
        target.stop_program("dashboard stop")
        return "Stopped", False
    if low == "pause":
        return ("Pausing program" if target.pause_program() else "Failed to execute: pause"), False
    if low == "unlock protective stop":
        ok, why = target.unlock_protective_stop()
        return ("Protective stop releasing" if ok else why), False
    if low == "close safety popup":
        return "closing safety popup", False
    if low == "close popup":
        return "closing popup", False
    if low.startswith("popup "):
        target.log(f"popup: {cmd[6:]}")
        return "showing popup", False
    if low.startswith("addtolog "):
        target.log(cmd[9:])
        return "Added log message", False
    if low == "isprogramsaved":
        return "true <unnamed>", False
    if low == "power on":
        target.power(True)
        return "Powering on", False
    if low == "power off":
        target.power(False)
        return "Powering off", False
    if low == "brake release":
        target.release_brakes()
        return "Brake releasing", False
    if low == "restart safety":
        target.restart_safety()
        return "Restarting safety", False
    if key == "setuserrole":
        return f"Setting user role: {cmd[12:].strip()}", False
    if key == "getuserrole":
        return "PROGRAMMER", False
    if low == "quit":
        return "Disconnected", True
    if low == "shutdown":
        target.shutdown()
        return "Shutting down", True
    return f"could not understand: '{cmd}'", False


def serve(target: DashboardTarget, sock: socket.socket) -> None:
    """One dashboard client, until it quits or closes (runs in its own thread)."""
    f = sock.makefile("rwb", buffering=0)
    try:
        sock.sendall((WELCOME + "\n").encode())
        for raw in f:
            reply, close = answer(target, raw.decode(errors="replace"))
            sock.sendall((reply + "\n").encode())
            if close:
                break
    except OSError:
        pass
    finally:
        sock.close()
