"""The PC's view of the modules' health: feedback staleness judged fairly when the PC itself stalls."""

from aiko.devices.can.health import HealthMonitor

FLAGS = {"Fault": 0, "Watchdog": 0, "EStop": 0, "Enabled": 1, "AtLimit": 0, "Saturated": 0}


def monitor(events: list) -> HealthMonitor:
    health = HealthMonitor((1, 2), stale_after_s=0.5, on_transition=lambda kind, node, _f: events.append((kind, node)))
    health.reset(0.0)
    return health


def test_a_module_that_goes_silent_is_stale_after_the_limit_while_the_pc_runs():
    events: list = []
    health = monitor(events)
    for k in range(1, 100):  # the PC checks every 10 ms; module 2 reports, module 1 stops after 0.1 s
        t = k * 0.01
        health.on_feedback(2, t, FLAGS)
        if t <= 0.1:
            health.on_feedback(1, t, FLAGS)
        health.check(t)
    assert events == [("module_feedback_stale", 1)]
    assert health.own_stalls == 0


def test_a_pc_stall_longer_than_the_limit_is_not_blamed_on_the_modules():
    events: list = []
    health = monitor(events)
    for k in range(1, 11):
        health.on_feedback(1, k * 0.01, FLAGS)
        health.on_feedback(2, k * 0.01, FLAGS)
        health.check(k * 0.01)
    # the PC stalls 1.5 s; the modules' frames of the stall wait in the receive queue, and the checker wakes first
    health.check(1.6)
    assert events == [] and health.own_stalls == 1
    health.on_feedback(1, 1.601, FLAGS)  # the receive thread delivers the backlog; module 2 really went silent
    for k in range(1, 60):
        t = 1.6 + k * 0.01
        health.on_feedback(1, t, FLAGS)
        health.check(t)
    assert events == [("module_feedback_stale", 2)]  # reported one limit after the stall, not at its end


def test_a_module_already_stale_stays_stale_across_a_stall():
    events: list = []
    health = monitor(events)
    for k in range(1, 80):
        health.on_feedback(2, k * 0.01, FLAGS)
        health.check(k * 0.01)
    assert events == [("module_feedback_stale", 1)]
    health.check(3.0)
    assert health.modules[1].stale and events == [("module_feedback_stale", 1)]


def test_checks_further_apart_than_the_timeout_still_judge_every_time():
    # feedback read at 10 Hz with a 50 ms timeout: every gap between checks is past the timeout, none is a stall
    events: list = []
    health = HealthMonitor((1, 2), stale_after_s=0.05, on_transition=lambda kind, node, _f: events.append((kind, node)))
    health.reset(0.0)
    for k in range(1, 20):
        t = k * 0.1
        health.on_feedback(2, t, FLAGS)
        if k < 5:
            health.on_feedback(1, t, FLAGS)
        health.check(t)
    assert events == [("module_feedback_stale", 1)] and health.own_stalls == 0
