"""hil and real are one backend class: the same calls reach the arm driver; only where the controller is differs."""

import numpy as np
import pytest

from aiko.core.clock import SimulatedClock
from aiko.core.errors import ConfigError
from aiko.core.recording import MemoryRecorder
from aiko.devices.ur.arm import ArmState
from aiko.robots.rod_bench.backends import create_bench_backend
from aiko.robots.rod_bench.backends.arm import BenchArmBackend, RealController
from aiko.robots.rod_bench.bench_experiment import load_bench_experiment
from aiko.robots.rod_bench.context import BenchContext
from aiko.robots.rod_bench.hil_site import EmulatedController
from aiko.robots.rod_bench.trajectory import BaseTrajectory

from .bench_files import write_experiment


class FakeReceive:
    def __init__(self, calls):
        self.calls = calls
        self.t = 10.0

    def getTimestamp(self):
        return self.t

    def getActualTCPForce(self):
        self.calls.append(("getActualTCPForce",))
        return [0.0, 0.0, -1.5, 0.0, 0.0, 0.0]


class FakeArm:
    """Records every call the backend makes on the driver (UR3Arm's surface)."""

    def __init__(self, host, limits, frequency_hz, link_timeout_s=2.0):
        self.calls = [("init", limits, frequency_hz)]
        self.link_timeout_s = link_timeout_s
        self.host = host
        self.receive = FakeReceive(self.calls)
        self.control = object()
        self._force_n = None

    def connect(self):
        self.calls.append(("connect",))
        return self

    def controller_time_s(self):
        return self.receive.getTimestamp()

    def tcp_force_n(self):
        return 0.0

    def move_linear(self, pose, speed, accel):
        self.calls.append(("move_linear", tuple(np.round(pose, 9)), speed, accel))

    def servo_linear(self, pose, period_s, lookahead, gain):
        self.calls.append(("servo_linear", tuple(np.round(pose, 9)), period_s, lookahead, gain))

    def state(self):
        self.calls.append(("state",))
        return ArmState(10.0, (-0.3, -0.11, 0.19, 3.09, 0.0, -0.55), (0.0,) * 6, (0.0,) * 6, 1, 7, 1, False)

    def stop(self):
        self.calls.append(("stop",))

    def close(self):
        self.calls.append(("close",))


class FakeSite:
    def __init__(self, host):
        self.host = host
        self.stopped = 0

    def start(self, ctx):
        return self.host

    def stop(self):
        self.stopped += 1

    def side_records(self):
        return []

    def summary(self):
        return {}


def drive(backend, experiment):
    ctx = BenchContext(experiment, MemoryRecorder(), SimulatedClock(), 0.1, None, None)
    backend.configure(ctx)
    backend.activate()
    traj = BaseTrajectory(experiment.scenario.base_motion, backend.mount)
    for k in range(5):
        backend.write(traj.target(k * 0.01, 0.01))
    obs = backend.read()
    backend.deactivate()
    backend.close()
    return obs


def test_hil_and_real_are_the_same_backend_class_with_different_sites():
    hil, real = create_bench_backend("hil"), create_bench_backend("real")
    assert type(hil) is type(real) is BenchArmBackend
    assert isinstance(hil.site, EmulatedController) and isinstance(real.site, RealController)


def test_hil_and_real_send_the_same_calls_to_the_arm_driver(tmp_path):
    experiment = load_bench_experiment(write_experiment(tmp_path))
    arms = {}
    sites = {"hil": FakeSite("127.0.0.46"), "real": FakeSite("192.168.1.10")}
    for name, site in sites.items():
        backend = create_bench_backend(name)
        backend.site = site  # only where the controller is differs; everything above the driver is the same

        def factory(host, limits, frequency_hz, link_timeout_s, name=name):
            arms[name] = FakeArm(host, limits, frequency_hz, link_timeout_s)
            return arms[name]

        backend.arm_factory = factory
        obs = drive(backend, experiment)
        assert obs.base_wrench[5] == pytest.approx(1.5)  # the flange feels -1.5 N in z: the base pushes up
        assert site.stopped == 1
    assert arms["hil"].host == "127.0.0.46" and arms["real"].host == "192.168.1.10"
    # a stall of the emulator (which ticks the rod) is a lost controller only after 10 s; of a real one after 2 s
    assert arms["hil"].link_timeout_s == 10.0 and arms["real"].link_timeout_s == 2.0
    assert arms["hil"].calls == arms["real"].calls
    kinds = [c[0] for c in arms["real"].calls]
    assert kinds[:3] == ["init", "connect", "move_linear"] and kinds.count("servo_linear") == 5
    assert kinds[-2:] == ["stop", "close"]


def test_real_without_a_host_is_a_one_line_config_error(tmp_path):
    experiment = load_bench_experiment(write_experiment(tmp_path))
    ctx = BenchContext(experiment, MemoryRecorder(), SimulatedClock(), 0.1)
    with pytest.raises(ConfigError, match=r"needs \[ur3\] host"):
        create_bench_backend("real").configure(ctx)


def test_hil_refuses_a_non_loopback_host(tmp_path):
    experiment = load_bench_experiment(write_experiment(tmp_path))
    ctx = BenchContext(experiment, MemoryRecorder(), SimulatedClock(), 0.1, "192.168.1.10", tmp_path)
    with pytest.raises(ConfigError, match="loopback"):
        create_bench_backend("hil").configure(ctx)
