"""The simulated arm and the control script's register protocol, without sockets."""

import numpy as np
import pytest

from aiko.devices.ur import arm_sim, control_script, plants
from aiko.devices.ur import kinematics as kin

DT = 0.002


def run(sim, seconds):
    for _ in range(round(seconds / DT)):
        sim.tick(DT)


def test_servo_tracks_first_order_and_respects_joint_speed_limits():
    sim = arm_sim.ArmSim()
    target = sim.q + np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.05])
    sim.start(arm_sim.ServoMotion(target, lookahead_time_s=0.1, gain=300))
    run(sim, 0.1)  # one time constant: 1 - 1/e of the way (discrete: within a percent)
    assert (sim.q[5] - arm_sim.HOME_Q[5]) / 0.05 == pytest.approx(1 - np.exp(-1), abs=0.01)
    far = sim.q + np.array([2.0, 0, 0, 0, 0, 0])
    sim.start(arm_sim.ServoMotion(far, 0.03, 2000))
    sim.tick(DT)
    assert abs(sim.qd[0]) == pytest.approx(np.pi, rel=1e-9)  # clipped to 180 deg/s, no protective stop
    assert not sim.protective_stopped


def test_movej_is_a_synchronised_trapezoid_that_arrives():
    sim = arm_sim.ArmSim()
    goal = sim.q + np.array([0.5, -0.2, 0.1, 0.0, 0.3, 0.0])
    motion = arm_sim.MoveJMotion(sim.q, goal, speed=1.0, accel=2.0)
    sim.start(motion)
    peak = 0.0
    while sim.motion is not None:
        sim.tick(DT)
        peak = max(peak, float(np.max(np.abs(sim.qd))))
    assert sim.q == pytest.approx(goal, abs=1e-12)
    assert peak <= 1.0 + 1e-9
    assert motion.profile.duration_s == pytest.approx(0.5 / 1.0 + 1.0 / 2.0)


def test_movel_keeps_the_tcp_on_the_line():
    sim = arm_sim.ArmSim()
    start = sim.tcp_pose()
    goal = start.copy()
    goal[:3] += [0.03, -0.02, 0.01]
    sim.start(arm_sim.MoveLMotion(sim, goal, speed=0.1, accel=0.5))
    direction = (goal[:3] - start[:3]) / np.linalg.norm(goal[:3] - start[:3])
    while sim.motion is not None:
        sim.tick(DT)
        off = sim.tcp_pose()[:3] - start[:3]
        assert np.linalg.norm(off - direction * (off @ direction)) < 1e-6
    assert sim.tcp_pose()[:3] == pytest.approx(goal[:3], abs=1e-7)


def test_workspace_violation_is_a_protective_stop_and_unlock_waits_the_delay():
    sim = arm_sim.ArmSim(safety=arm_sim.SafetyConfig(unlock_delay_s=0.5))
    goal = sim.tcp_pose()
    goal[2] = -0.25  # below the default box floor at z = -0.2
    sim.start(arm_sim.MoveLMotion(sim, goal, speed=0.25, accel=1.0))
    for _ in range(1500):
        sim.tick(DT)
        if sim.protective_stopped:
            break
    assert sim.protective_stopped and "workspace" in sim.protective_stop_reason
    assert sim.tcp_pose()[2] >= -0.2  # held at the last safe joints
    held = sim.q.copy()
    sim.start(arm_sim.ServoMotion(held + 0.1, 0.1, 300))  # ignored while stopped
    run(sim, 0.1)
    assert sim.q == pytest.approx(held)
    assert sim.motion is None
    ok, why = sim.unlock()
    assert not ok and "Cannot unlock protective stop" in why
    run(sim, 0.45)
    assert sim.unlock() == (True, "")
    assert sim.safety_mode == arm_sim.SAFETY_NORMAL


def test_joint_limit_is_a_protective_stop():
    sim = arm_sim.ArmSim(q0=(0, -1.57, 1.57, -1.57, -1.57, 6.2))
    sim.start(arm_sim.MoveJMotion(sim.q, sim.q + [0, 0, 0, 0, 0, 0.2], 1.0, 2.0))
    run(sim, 1.0)
    assert sim.protective_stopped and "joint 5 position limit" in sim.protective_stop_reason
    assert sim.q[5] <= 2 * np.pi


def test_plant_hook_sees_the_flange_and_its_wrench_is_reported():
    seen = []

    def hook(t_s, flange_pose, flange_speed):
        seen.append((t_s, flange_pose.copy(), flange_speed.copy()))
        return [0, 0, 5.0, 0, 0, 0]

    sim = arm_sim.ArmSim(plant=hook)
    sim.tcp_offset = np.array([0, 0, 0.1, 0, 0, 0])  # the hook gets the flange, not the TCP
    sim.start(arm_sim.SpeedMotion(np.array([0.0, 0.0, 0.05, 0, 0, 0]), 10.0, tool=True))
    run(sim, 0.1)
    assert len(seen) == 50 and seen[-1][0] == pytest.approx(0.1)
    assert seen[-1][1] == pytest.approx(kin.forward(kin.UR3, sim.q), abs=1e-12)
    assert seen[-1][2][2] == pytest.approx(0.05, abs=1e-3)
    assert sim.wrench[2] == 5.0


def test_spring_floor_pushes_only_below_its_plane():
    floor = plants.SpringFloor(z_m=0.1, stiffness_n_m=1000.0)
    assert floor(0.0, np.array([0, 0, 0.2, 0, 0, 0]), np.zeros(6)) is None
    assert floor(0.0, np.array([0, 0, 0.09, 0, 0, 0]), np.zeros(6))[2] == pytest.approx(10.0)


class Registers:
    def __init__(self, offset=0):
        self.sim = arm_sim.ArmSim()
        self.in_int, self.in_double = [0] * 48, [0.0] * 48
        self.out_int, self.out_double = [0] * 48, [0.0] * 48
        self.script = control_script.ControlScript(
            self.sim, self.in_int, self.in_double, self.out_int, self.out_double, offset
        )

    def tick(self, n=1):
        for _ in range(n):
            self.sim.tick(DT)
            self.script.tick(self.sim.time_s)


def test_blocking_movel_handshake_ready_done_clear_ready():
    r = Registers()
    assert r.out_int[0] == control_script.READY_FOR_CMD
    goal = r.sim.tcp_pose()
    goal[0] += 0.01
    r.in_double[:8] = [*goal, 0.1, 1.0]
    r.in_int[0], r.in_int[1] = control_script.MOVEL, 0
    r.tick()
    assert r.out_int[0] == control_script.READY_FOR_CMD  # inside movel: not done yet
    for _ in range(2000):
        r.tick()
        if r.out_int[0] == control_script.DONE_WITH_CMD:
            break
    assert r.out_int[0] == control_script.DONE_WITH_CMD
    assert r.sim.tcp_pose()[0] == pytest.approx(goal[0], abs=1e-7)
    r.in_int[0] = control_script.NO_CMD
    r.tick()
    assert r.out_int[0] == control_script.READY_FOR_CMD


def test_async_move_reports_progress_in_output_int_register_2():
    r = Registers(offset=24)  # FLAG_UPPER_RANGE_REGISTERS moves everything up by 24
    q = r.sim.q + [0.2, 0, 0, 0, 0, 0]
    r.in_double[24:32] = [*q, 1.0, 2.0]
    r.in_int[24], r.in_int[25] = control_script.MOVEJ, 1
    r.tick()
    assert r.out_int[24] == control_script.DONE_WITH_CMD  # async: done at once
    assert r.out_int[26] & 0x8000  # running bit
    r.in_int[24] = 0
    r.tick(500)
    assert not r.out_int[26] & 0x8000
    assert r.sim.q == pytest.approx(q)


def test_watchdog_stops_the_program_when_the_register_is_not_updated():
    r = Registers()
    r.in_double[0] = 10.0  # 10 Hz: 0.1 s
    r.in_int[0] = control_script.SET_WATCHDOG
    r.tick()
    r.in_int[0] = 0
    for _ in range(100):  # 0.2 s with an update every tick
        r.script.input_updated({"input_int_register_0"}, r.sim.time_s)
        r.tick()
    assert r.script.running
    r.tick(60)
    assert not r.script.running and r.script.stop_reason == "watchdog"


def test_register_offset_is_read_from_the_uploaded_script():
    assert control_script.register_offset("global reg_offset_int = 24\n") == 24
    assert control_script.register_offset("    global reg_offset_int = # int register offset\n24\n") == 24
    assert control_script.register_offset("    global reg_offset_int = # int register offset\n0\n") == 0


def test_move_path_is_read_from_the_injected_lines():
    script = (
        "    def exec_move_path():\n        # inject move path\n"
        "\tsignal_async_progress(0)\n\tmovel(p[0.1,-0.2,0.3,0,3.14,0],a=0.5,v=0.1,r=0)\n"
        "\tsignal_async_progress(1)\n\tmovej([0,-1.57,1.57,-1.57,-1.57,0],a=1.4,v=1.05,r=0.01)\n    end\n"
    )
    path = control_script.move_path(script)
    assert [(k, is_pose, a, v) for k, is_pose, _, a, v in path] == [
        ("movel", True, 0.5, 0.1),
        ("movej", False, 1.4, 1.05),
    ]
    assert path[0][2] == pytest.approx([0.1, -0.2, 0.3, 0, 3.14, 0])


def test_joint_speed_over_the_limit_is_a_protective_stop():
    sim = arm_sim.ArmSim()
    sim.start(arm_sim.SpeedMotion(np.array([4.0, 0, 0, 0, 0, 0]), 40.0, tool=False))  # base limit: pi rad/s
    run(sim, 0.5)
    assert sim.protective_stopped and "joint 0 speed limit exceeded" in sim.protective_stop_reason
    assert np.all(sim.qd == 0)
