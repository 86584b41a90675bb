"""The dashboard server's replies, against UR's documented strings (docs/ur3.md, "Dashboard server")."""

import re

import pytest

from aiko.devices.ur import dashboard


class Target:
    """A controller for the dashboard to talk to (what UR3Emulator provides)."""

    robot_mode = 7
    polyscope_version = "URSoftware 3.15.8.106339 (Jul 17 2023)"
    serial_number = "20180300000"
    model_name = "UR3"

    def __init__(self, version=(3, 15, 8, 106339)):
        self.version = version
        self.mode = 3
        self.state = "PLAYING"
        self.calls = []

    def safety_mode(self):
        return self.mode

    def program_state(self):
        return self.state

    def resume_program(self):
        self.calls.append("resume")
        if self.state != "PAUSED":
            return False
        self.state = "PLAYING"
        return True

    def pause_program(self):
        self.state = "PAUSED"
        return True

    def stop_program(self, reason):
        self.calls.append(reason)
        self.state = "STOPPED"

    def unlock_protective_stop(self):
        self.mode = 1
        return True, ""

    def power(self, on):
        self.robot_mode = 5 if on else 3
        return True

    def release_brakes(self):
        self.robot_mode = 7
        return True

    def restart_safety(self):
        self.robot_mode = 3
        self.mode = 1

    def shutdown(self):
        self.calls.append("shutdown")

    def log(self, message):
        self.calls.append(message)


# Reply patterns of UR's own client (Universal_Robots_Client_Library, dashboard_client_implementation_g5.cpp).
UR_PATTERNS = {
    "play": "Starting program",
    "stop": "Stopped",
    "pause": "Pausing program",
    "quit": "Disconnected",
    "running": "(?:Program running: ).*",
    "robotmode": "(?:Robotmode: ).*",
    "popup hello": "showing popup",
    "close popup": "closing popup",
    "addToLog hello": "Added log message",
    "isProgramSaved": "(?:true|false).*",
    "programState": "(STOPPED|PLAYING|PAUSED) .*",
    "PolyscopeVersion": "(?:URSoftware ).*",
    "power on": "Powering on",
    "power off": "Powering off",
    "brake release": "Brake releasing",
    "safetymode": "(?:Safetymode: ).*",
    "unlock protective stop": "Protective stop releasing",
    "close safety popup": "closing safety popup",
    "restart safety": "Restarting safety",
    "get serial number": "(?:20).*",
    "get robot model": "(?:UR).*",
    "setUserRole programmer": "Setting user role: programmer",
}


@pytest.mark.parametrize("command", sorted(UR_PATTERNS))
def test_each_reply_matches_urs_documented_pattern(command):
    t = Target()
    if command == "play":
        t.state = "PAUSED"
    reply, _ = dashboard.answer(t, command)
    assert re.fullmatch(UR_PATTERNS[command], reply), reply


def test_commands_newer_than_the_controller_are_not_understood():
    cb3, e_series = Target(), Target((5, 11, 1, 108318))
    for command in ("safetystatus", "is in remote control"):
        assert dashboard.answer(cb3, command) == (f"could not understand: '{command}'", False)
    assert dashboard.answer(e_series, "safetystatus") == ("Safetystatus: PROTECTIVE_STOP", False)
    assert dashboard.answer(e_series, "is in remote control") == ("true", False)


def test_play_resumes_only_a_paused_program_and_load_is_refused():
    t = Target()
    assert dashboard.answer(t, "play")[0] == "Failed to execute: play"  # nothing paused, no .urp programs here
    assert dashboard.answer(t, "pause")[0] == "Pausing program"
    assert dashboard.answer(t, "programState")[0] == "PAUSED <unnamed>"
    assert dashboard.answer(t, "play")[0] == "Starting program"
    assert dashboard.answer(t, "load /programs/x.urp")[0] == "Error while loading program: /programs/x.urp"
    assert dashboard.answer(t, "get loaded program")[0] == "No program loaded"


def test_restart_safety_leaves_the_arm_powered_off_and_power_on_brake_release_bring_it_back():
    t = Target()
    assert dashboard.answer(t, "restart safety")[0] == "Restarting safety"
    assert dashboard.answer(t, "robotmode")[0] == "Robotmode: POWER_OFF"
    dashboard.answer(t, "power on")
    assert dashboard.answer(t, "robotmode")[0] == "Robotmode: IDLE"
    dashboard.answer(t, "brake release")
    assert dashboard.answer(t, "robotmode")[0] == "Robotmode: RUNNING"


def test_unknown_commands_quit_and_shutdown():
    t = Target()
    assert dashboard.answer(t, "frobnicate") == ("could not understand: 'frobnicate'", False)
    assert dashboard.answer(t, "quit") == ("Disconnected", True)
    assert dashboard.answer(t, "shutdown") == ("Shutting down", True) and "shutdown" in t.calls
