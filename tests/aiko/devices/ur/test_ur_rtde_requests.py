"""Every request of ur_rtde 1.6.5 that the UR3 emulator refuses or implements beyond plain motion, through the
unmodified client (rtde_control, rtde_receive, rtde_io, dashboard_client) against ``aiko emulate ur3`` in another
process: docs/ur3.md, "Every request". A refused request returns False (a getter raises "... did not succeed!"),
ur_rtde prints "RTDE control script is not running!", and the session goes on: the next request works."""

import math
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from aiko.devices.ur import kinematics as kin

from .ur3_emulator_process import REPO, running, stop

rtde_control = pytest.importorskip("rtde_control")
rtde_receive = pytest.importorskip("rtde_receive")
rtde_io = pytest.importorskip("rtde_io")
dashboard_client = pytest.importorskip("dashboard_client")

pytestmark = pytest.mark.timeout(180)

CB3_HOST, E_SERIES_HOST, PLANT_HOST, SESSION_HOST = "127.0.0.150", "127.0.0.151", "127.0.0.152", "127.0.0.153"
SPRING_FLOOR = ("--plant", "aiko.devices.ur.plants:spring_floor")  # z = 0.10 m, 2000 N/m


def eventually(check, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return True


class Arm:
    def __init__(self, host, frequency=500.0):
        self.r = rtde_receive.RTDEReceiveInterface(host, frequency)
        self.c = rtde_control.RTDEControlInterface(host, frequency)

    def close(self):
        for x in (self.c, self.r):
            x.disconnect()

    def usable(self):
        """After a refusal the program resumes once ur_rtde has cleared the register; then a request works."""
        assert eventually(self.c.isProgramRunning, 5.0)
        return self.c.isSteady() or self.c.isProgramRunning()


@pytest.fixture(scope="module")
def cb3():
    with running(CB3_HOST, "--rate-hz", "500") as proc:
        arm = Arm(CB3_HOST)
        try:
            yield arm
        finally:
            arm.c.stopScript()
            arm.close()
        stop(proc)


@pytest.fixture(scope="module")
def e_series():
    with running(E_SERIES_HOST, "--model", "ur3e", *SPRING_FLOOR) as proc:
        arm = Arm(E_SERIES_HOST)
        try:
            yield arm
        finally:
            arm.c.stopScript()
            arm.close()
        stop(proc)


def _false(call):
    """A blocking request: ur_rtde returns False."""
    return lambda c: call(c) is False


def _raises(call):
    """A blocking getter: ur_rtde raises "... did not succeed!"."""

    def run(c):
        with pytest.raises(RuntimeError, match="did not succeed"):
            call(c)
        return True

    return run


def _real_time(call, client_error=None):
    """A real-time request: ur_rtde returns at once (True, or a register read before any answer); the program
    pauses on it, and the client's next request is the one that fails, clearing the register. ``client_error``:
    ur_rtde itself raises this after sending (it subscribed no register for the answer on this version)."""

    def run(c):
        if client_error is None:
            call(c)
        else:
            with pytest.raises(RuntimeError, match=client_error):
                call(c)
        paused = eventually(lambda: not c.isProgramRunning(), 5.0)
        return paused and c.isSteady() is False

    return run


Z = [0.0, 0.0, -0.1, 0.0, 0.0, 0.0]
NO_REGISTER = "unable to get state data for specified key: output_double_register_6"
# On the CB3 (3.15.8) the emulator refuses what ur_rtde's script has no body for (PolyScope 5.x functions) and what
# the emulated arm cannot model. Each row: the ur_rtde call and how it shows the refusal.
CB3_REFUSED = {
    "moveUntilContact": _false(lambda c: c.moveUntilContact(Z)),
    "toolContact": _real_time(lambda c: c.toolContact(Z)),
    "getStepTime": _real_time(lambda c: c.getStepTime()),
    "getActualJointPositionsHistory": _real_time(lambda c: c.getActualJointPositionsHistory(1)),
    "getTargetWaypoint": lambda c: c.getTargetWaypoint() == [],  # ur_rtde's failure value
    "freedriveMode": _false(lambda c: c.freedriveMode([1, 1, 1, 0, 0, 0], [0.0] * 6)),
    "endFreedriveMode": _false(lambda c: c.endFreedriveMode()),
    "getFreedriveStatus": _raises(lambda c: c.getFreedriveStatus()),
    "ftRtdeInputEnable": _false(lambda c: c.ftRtdeInputEnable(True)),
    "startContactDetection": _false(lambda c: c.startContactDetection(Z)),
    "setTargetPayload": _false(lambda c: c.setTargetPayload(1.0, [0.0, 0.0, 0.05], [0.0] * 6)),
    "forceModeSetGainScaling": _false(lambda c: c.forceModeSetGainScaling(0.5)),
    "setGravity": _false(lambda c: c.setGravity([0.0, 0.0, -9.81])),
    "forceMode type 1": _real_time(lambda c: c.forceMode([0.0] * 6, [0, 0, 1, 0, 0, 0], [0.0] * 6, 1, [0.1] * 6)),
    "directTorque": _real_time(lambda c: c.directTorque([0.0] * 6)),
    "getMassMatrix": _real_time(lambda c: c.getMassMatrix(), NO_REGISTER),
    "getJacobian": _real_time(lambda c: c.getJacobian(), NO_REGISTER),
    "getJacobianTimeDerivative": _real_time(lambda c: c.getJacobianTimeDerivative(), NO_REGISTER),
    "getCoriolisAndCentrifugalTorques": _real_time(lambda c: c.getCoriolisAndCentrifugalTorques()),
    "getTargetJointAccelerations": _real_time(lambda c: c.getTargetJointAccelerations()),
}


@pytest.mark.parametrize("request_name", sorted(CB3_REFUSED))
def test_a_refused_request_fails_visibly_and_the_session_stays_usable(cb3, request_name):
    assert cb3.usable()
    q0 = np.array(cb3.r.getActualQ())
    assert CB3_REFUSED[request_name](cb3.c)
    assert cb3.usable()
    assert np.allclose(cb3.r.getActualQ(), q0)  # nothing moved
    goal = list(q0)
    goal[5] += 0.01 if goal[5] < 1.0 else -0.01
    assert cb3.c.moveJ(goal, 1.0, 2.0)  # and the next motion works
    assert eventually(lambda: np.allclose(cb3.r.getActualQ(), goal, atol=1e-9))


def test_real_time_getters_answer_from_the_controller_never_a_stale_register(cb3):
    assert cb3.usable()
    # ur_rtde reads a real-time getter's registers right after sending it (before any controller has answered):
    # the first call holds what the registers held; once a package has come back the values are the controller's.
    cb3.c.getActualToolFlangePose()
    time.sleep(0.05)
    flange = cb3.c.getActualToolFlangePose()
    assert np.allclose(flange, cb3.r.getActualTCPPose(), atol=1e-9)  # no TCP offset set
    cb3.c.getJointTorques()
    time.sleep(0.05)
    assert np.allclose(cb3.c.getJointTorques(), 0.0)  # no plant: no external wrench on the flange
    pose = cb3.c.poseTrans([0.1, 0.0, 0.0, 0.0, 0.0, math.pi / 2], [0.0, 0.1, 0.0, 0.0, 0.0, 0.0])
    assert np.allclose(pose, [0.0, 0.0, 0.0, 0.0, 0.0, math.pi / 2], atol=1e-9)  # rotated 90 deg about z, then y


def test_unmodelled_outputs_are_nan_not_made_up(cb3):
    for getter in ("getActualCurrent", "getJointTemperatures", "getTargetMoment", "getJointControlOutput"):
        assert all(math.isnan(v) for v in getattr(cb3.r, getter)()), getter
    for getter in ("getActualMainVoltage", "getActualRobotCurrent", "getActualMomentum", "getStandardAnalogInput0"):
        assert math.isnan(getattr(cb3.r, getter)()), getter
    assert np.allclose(np.linalg.norm(cb3.r.getActualToolAccelerometer()), 9.81)  # gravity, in the tool frame


def test_digital_and_analog_outputs_read_back_in_the_receive_interface():
    host = "127.0.0.154"
    with running(host, "--rate-hz", "500"):
        r = rtde_receive.RTDEReceiveInterface(host, 500.0)
        io = rtde_io.RTDEIOInterface(host)
        try:
            assert not r.getDigitalOutState(7) and not r.getDigitalOutState(16)
            assert io.setStandardDigitalOut(7, True) and io.setToolDigitalOut(0, True)
            assert io.setConfigurableDigitalOut(1, True)
            assert eventually(lambda: r.getDigitalOutState(7) and r.getDigitalOutState(16) and r.getDigitalOutState(9))
            assert io.setStandardDigitalOut(7, False)
            assert eventually(lambda: not r.getDigitalOutState(7) and r.getDigitalOutState(16))
            assert io.setAnalogOutputCurrent(1, 0.25)  # 4-20 mA: 8 mA
            assert io.setAnalogOutputVoltage(0, 0.5)  # 0-10 V: 5 V
            assert eventually(lambda: abs(r.getStandardAnalogOutput1() - 0.008) < 1e-12)
            assert eventually(lambda: abs(r.getStandardAnalogOutput0() - 5.0) < 1e-12)
        finally:
            io.disconnect()
            r.disconnect()


def test_the_speed_slider_scales_a_move_in_time():
    host = "127.0.0.155"
    with running(host, "--rate-hz", "250"):
        arm = Arm(host, 250.0)
        io = rtde_io.RTDEIOInterface(host)
        try:

            def duration(q):  # controller time, so a busy machine does not change the measure
                t0 = arm.r.getTimestamp()
                assert arm.c.moveJ(q, 1.0, 2.0)
                return arm.r.getTimestamp() - t0

            q0 = list(arm.r.getActualQ())
            q1 = list(q0)
            q1[0] += 0.5
            full = duration(q1)
            assert io.setSpeedSlider(0.2)
            assert eventually(lambda: arm.r.getSpeedScaling() == 0.2 and arm.r.getTargetSpeedFraction() == 0.2)
            slow = duration(q0)
        finally:
            io.disconnect()
            arm.c.stopScript()
            arm.close()
    # time scaled by 1/0.2: speeds x0.2, accelerations x0.04 (one controller tick of rounding each way)
    assert slow / full == pytest.approx(5.0, rel=0.03)


def test_force_mode_presses_on_the_plant_until_the_wrench_balances_then_zero_teach_and_jog():
    with running(PLANT_HOST, "--rate-hz", "250", *SPRING_FLOOR):
        arm = Arm(PLANT_HOST, 250.0)
        c, r = arm.c, arm.r
        try:
            assert r.getActualTCPPose()[2] > 0.2  # above the floor (z = 0.10)
            down = [0.0, 0.0, -10.0, 0.0, 0.0, 0.0]
            assert c.forceMode([0.0] * 6, [0, 0, 1, 0, 0, 0], down, 2, [0.1, 0.1, 0.15, 1.0, 1.0, 1.0])
            # 10 N into a 2000 N/m floor: 5 mm deep; the floor pushes back 10 N
            assert eventually(lambda: abs(r.getActualTCPForce()[2] - 10.0) < 0.2, 30)
            assert r.getActualTCPPose()[2] == pytest.approx(0.095, abs=2e-4)
            assert c.forceModeStop()
            assert eventually(lambda: np.linalg.norm(r.getActualTCPSpeed()) < 1e-9)
            torques = c.getJointTorques()
            time.sleep(0.05)
            torques = np.array(c.getJointTorques())
            expected = kin.jacobian(kin.UR3, np.array(r.getActualQ())).T @ np.array(r.getActualTCPForce())
            assert np.allclose(torques, expected, atol=1e-6) and np.abs(torques).max() > 0.5
            assert c.zeroFtSensor()
            assert eventually(lambda: np.allclose(r.getActualTCPForce(), 0.0, atol=1e-9))
            assert c.teachMode()  # the arm yields to the floor's 10 N until it rests on its surface
            assert eventually(lambda: r.getActualTCPPose()[2] > 0.0999, 30)
            assert c.endTeachMode()
            z0 = r.getActualTCPPose()[2]
            assert c.jogStart([0.0, 0.0, 0.02, 0.0, 0.0, 0.0])
            assert eventually(lambda: r.getActualTCPPose()[2] > z0 + 0.005)
            assert c.jogStop()
            assert eventually(lambda: np.linalg.norm(r.getActualTCPSpeed()) < 1e-9)
            assert c.setPayload(1.5, [0.0, 0.0, 0.05])
            assert eventually(lambda: r.getPayload() == 1.5 and r.getPayloadCog() == [0.0, 0.0, 0.05])
        finally:
            c.stopScript()
            arm.close()


def test_e_series_version_gated_requests_are_carried_out(e_series):
    c, r = e_series.c, e_series.r
    assert e_series.usable()
    c.getStepTime()
    time.sleep(0.05)
    assert c.getStepTime() == pytest.approx(0.002)  # the controller period (500 Hz)
    assert c.moveUntilContact([0.0, 0.0, -0.05, 0.0, 0.0, 0.0])  # down onto the spring floor (z = 0.10)
    assert r.getActualTCPPose()[2] == pytest.approx(0.0975, abs=1.5e-3)  # 5 N of contact: 2.5 mm deep
    assert c.freedriveMode([0, 0, 1, 0, 0, 0], [0.0] * 6)
    c.getFreedriveStatus()
    assert eventually(lambda: c.getFreedriveStatus() == 1)
    assert eventually(lambda: r.getActualTCPPose()[2] > 0.0999, 30)  # free in z: pushed out of the floor
    assert c.endFreedriveMode()
    assert _real_time(lambda c: c.directTorque([0.0] * 6))(c)  # no dynamic model, whatever the version
    assert e_series.usable()


def test_reupload_never_reruns_the_command_an_earlier_program_left_in_the_register():
    host = "127.0.0.156"
    with running(host, "--rate-hz", "500"):
        arm = Arm(host)
        c, r = arm.c, arm.r
        dash = dashboard_client.DashboardClient(host)
        dash.connect()
        try:
            assert c.speedL([0.0, 0.0, 0.02, 0.0, 0.0, 0.0], 0.5, 0.0)  # real-time: stays in the register
            assert eventually(lambda: np.linalg.norm(r.getActualTCPSpeed()[:3]) > 0.01)
            dash.stop()  # the program stops with speedL (command 10) still in the command register
            assert eventually(lambda: not c.isProgramRunning() and np.linalg.norm(r.getActualTCPSpeed()) < 1e-9)
            assert c.reuploadScript()
            assert eventually(c.isProgramRunning)
            t0 = r.getTimestamp()
            assert eventually(lambda: r.getTimestamp() > t0 + 0.3)
            assert np.linalg.norm(r.getActualTCPSpeed()) < 1e-9  # the restarted program did not resume speedL
            assert c.isSteady()
        finally:
            dash.disconnect()
            c.stopScript()
            arm.close()


CLIENT = textwrap.dedent(
    """
    import sys, time, rtde_control
    c = rtde_control.RTDEControlInterface(sys.argv[1], 500.0)
    print("connected", flush=True)
    time.sleep(600)
    """
)


@pytest.mark.parametrize("how", ["killed", "stalled"])
def test_a_dead_sessions_registers_are_released_for_the_next_client(how):
    with running(SESSION_HOST, "--rate-hz", "500") as proc:
        env = dict(os.environ, PYTHONPATH=str(REPO))
        client = subprocess.Popen([sys.executable, "-c", CLIENT, SESSION_HOST], stdout=subprocess.PIPE, text=True,
                                  env=env)  # fmt: skip
        try:
            assert client.stdout.readline().strip() == "connected"
            if how == "killed":
                client.kill()  # the kernel closes its sockets
            else:
                client.send_signal(signal.SIGSTOP)  # alive but reading nothing: its socket buffer fills
            deadline = time.monotonic() + 30
            while True:  # a controller refuses a second holder of the inputs while the first is connected
                try:
                    arm = Arm(SESSION_HOST)
                    break
                except RuntimeError:
                    assert time.monotonic() < deadline, "the dead session's inputs were never released"
                    time.sleep(0.5)
            try:
                assert arm.c.isProgramRunning() and arm.c.isSteady()
            finally:
                arm.c.stopScript()
                arm.close()
        finally:
            if client.poll() is None:
                client.send_signal(signal.SIGCONT)
                client.kill()
            client.wait()
        stop(proc)
