"""The lockstep HIL run on the 3D simulator: compiled module ticks (backends/hil_snake3d.py) vs the reference path."""

import subprocess
import sys
import threading
from pathlib import Path

import can
import numpy as np
import pytest

import firmware_protocol.emulator.modules as emulator_module
from aiko.core.recording import MemoryRecorder
from aiko.robots.aiko.backends import hil_snake3d
from aiko.robots.aiko.backends.hil import HilBackend
from aiko.robots.aiko.backends.hil_snake3d import Snake3DHilPlant, run_ticks_snake3d
from aiko.robots.aiko.experiment import load_experiment
from aiko.robots.aiko.run import RunOptions, run_experiment
from firmware_protocol.emulator import EmulatorConfig, JointControllerEmulator
from sim.snake3d import posture_state
from sim.snake3d.model import ContactNotConvergedError, SnakeModel
from sim.snake3d.plant import Snake3DPlant

REPO = Path(__file__).resolve().parents[5]
HIL = REPO / "experiments" / "sidewinding_hil.toml"


def _run(monkeypatch, compiled: bool, overrides: dict, duration_s: float):
    with monkeypatch.context() as patch:
        if not compiled:
            patch.setattr(emulator_module, "compiled_runner", lambda plant: None)
        recorder, backend = MemoryRecorder(), HilBackend()
        _, summary = run_experiment(
            load_experiment(HIL, overrides), recorder, RunOptions(duration_s=duration_s), backend=backend
        )
    return recorder, summary, backend


@pytest.mark.parametrize(
    "overrides",
    [{}, {"hil.sensor": "joint", "hil.reference_hold": "linear", "hil.feedback_rate_hz": 250.0}],
    ids=["make-run", "joint-sensor-linear-hold"],
)
def test_compiled_hil_run_equals_the_reference_path_bit_for_bit(monkeypatch, overrides):
    fast, fast_summary, fast_backend = _run(monkeypatch, True, overrides, 0.6)
    reference, reference_summary, reference_backend = _run(monkeypatch, False, overrides, 0.6)
    assert isinstance(fast_backend.emulator.plant, Snake3DHilPlant)
    assert fast_backend.emulator.plant.plant.simulator.stats.steps == 2400  # the compiled path ran the simulator
    for name in ("tracked_point_end_m", "physics_steps", "can_frames_sent", "can_frames_received", "emulator"):
        assert fast_summary[name] == reference_summary[name], name
    solver, reference_solver = fast_summary["plant_solver"], reference_summary["plant_solver"]
    assert {k: v for k, v in solver.items() if "wall" not in k} == {
        k: v for k, v in reference_solver.items() if "wall" not in k
    }
    feedback = [payload for _, payload in fast.channels["/joint_feedback"]]
    assert len(feedback) > 50 and feedback == [payload for _, payload in reference.channels["/joint_feedback"]]
    fast_positions, fast_quaternions = fast_backend.link_poses()
    positions, quaternions = reference_backend.link_poses()
    np.testing.assert_array_equal(fast_positions, positions)
    np.testing.assert_array_equal(fast_quaternions, quaternions)


def test_the_kernels_cache_key_holds_a_digest_of_the_sources_it_compiles_in():
    """numba caches by the kernel's own file: the digest of sim/snake3d and the module kernels in its closure makes
    a change there a new cache key (else a stale compiled simulator would run silently)."""
    digest = run_ticks_snake3d.py_func.__closure__
    values = [cell.cell_contents for cell in digest]
    assert values == [hil_snake3d._sources_digest()]


_CACHE_KEY = """
import hashlib
from numba.core.serialize import dumps
from aiko.robots.aiko.backends.hil_snake3d import run_ticks_snake3d
cells = tuple(cell.cell_contents for cell in run_ticks_snake3d.py_func.__closure__)
print(hashlib.sha256(dumps(cells)).hexdigest())
"""


def test_the_kernels_cache_key_is_the_same_in_every_process():
    """numba keys a closure's cache entry on the pickled cell contents (`numba.core.caching._CacheImpl` hashes
    `dumps(cells)`). A closure over numba dispatchers pickled a per-process uuid: every `aiko run` of the HIL job
    compiled the kernel again (~8 s) and added an index entry. Two processes must compute the same key."""
    keys = {
        subprocess.run(
            [sys.executable, "-c", _CACHE_KEY], capture_output=True, text=True, check=True, timeout=300
        ).stdout.strip()
        for _ in range(2)
    }
    assert len(keys) == 1


def _failing_emulator(channel: str, use_reference: bool):
    """Modules on a simulator whose contact iteration gets 2 sweeps, no retries, no halvings, dropped from 2 cm: the
    step of the first contact fails (after ~60 ticks, inside a compiled batch), and the compiled path must raise the
    simulator's own error at the same step as the reference, with the same ticks counted."""
    model = SnakeModel(max_iterations=2, max_retries=0, max_step_halvings=0)
    plant = Snake3DHilPlant(Snake3DPlant(model, posture_state(model, height_m=0.02)))
    bus = can.Bus(interface="virtual", channel=channel)
    return bus, JointControllerEmulator(bus, EmulatorConfig(), plant, use_reference=use_reference)


def test_a_failed_simulator_step_raises_the_same_error_on_both_paths():
    outcomes = []
    for use_reference in (False, True):
        bus, emulator = _failing_emulator(f"test-hil-fast-failure-{use_reference}", use_reference)
        try:
            with pytest.raises(ContactNotConvergedError) as error:
                emulator.step_to(0.1)
        finally:
            bus.shutdown()
        simulator = emulator.plant.plant.simulator
        outcomes.append((str(error.value), emulator.tick, simulator.state.t_s, simulator.stats.steps))
        outcomes[-1] += (simulator.state.position_m.tolist(), emulator.drive.gear_angle_rad.tolist())
    assert outcomes[0] == outcomes[1]
    assert 10 < outcomes[0][1] < 200 and outcomes[0][1] % 10 != 0, outcomes[0][:4]  # inside a batch of 10 ticks


def _resting_emulator(channel: str):
    model = SnakeModel()
    plant = Snake3DHilPlant(Snake3DPlant(model, posture_state(model)))
    bus = can.Bus(interface="virtual", channel=channel)
    return bus, JointControllerEmulator(bus, EmulatorConfig(), plant)


def test_the_compiled_ticks_let_other_threads_run_while_they_integrate(monkeypatch):
    """The kernel releases the interpreter lock, so the log's writer works beside the plant, not in turns with it.
    With the switch interval made huge, a thread that blocks and wakes can only get the interpreter back while the
    main thread is in a call that released it: its counter moves across a kernel call only if the kernel did. A
    kernel that holds the lock can never pass; one that releases it passes once the thread gets a core during one
    of up to 400 calls (a loaded machine only makes that take more calls)."""
    bus, emulator = _resting_emulator("test-hil-fast-nogil")
    counter = [0]
    stop = threading.Event()
    moved = []

    def wake_and_count() -> None:
        while not stop.wait(0.0005):
            counter[0] += 1

    def watched_kernel(*args):
        before = counter[0]
        result = run_ticks_snake3d(*args)
        moved.append(counter[0] != before)
        return result

    monkeypatch.setattr(hil_snake3d, "run_ticks_snake3d", watched_kernel)
    previous_interval = sys.getswitchinterval()
    sys.setswitchinterval(100.0)
    thread = threading.Thread(target=wake_and_count, daemon=True)
    try:
        thread.start()
        t_s = 0.0
        while not any(moved) and len(moved) < 400:
            t_s += 0.05
            emulator.step_to(t_s)
    finally:
        sys.setswitchinterval(previous_interval)
        stop.set()
        thread.join()
        bus.shutdown()
    assert moved and any(moved), f"no other thread ran during {len(moved)} kernel calls"


def test_a_real_time_pose_read_waits_for_the_batch_of_ticks_in_progress():
    """In real time the ticks run in the transport's thread with its lock held and the interpreter released: the
    run's pose read takes that lock, so it never sees links from two sub-steps."""
    bus, emulator = _resting_emulator("test-hil-fast-pose-lock")
    read = threading.Event()
    try:
        with emulator._lock:  # a batch of ticks in progress
            reader = threading.Thread(target=lambda: (emulator.plant_link_poses(), read.set()), daemon=True)
            reader.start()
            assert not read.wait(0.2), "the pose was read while the ticks held the transport"
        assert read.wait(60.0)
        positions, quaternions = emulator.plant_link_poses()
        np.testing.assert_array_equal(positions, emulator.plant.link_poses()[0])
        np.testing.assert_array_equal(quaternions, emulator.plant.link_poses()[1])
    finally:
        bus.shutdown()
