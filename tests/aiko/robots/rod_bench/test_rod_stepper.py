"""RodStepper.prime: the kernels load before a run's clock starts, and the trajectory is the one it would have been."""

import numpy as np

from aiko.robots.rod_bench.bench_experiment import load_bench_experiment
from aiko.robots.rod_bench.rod_stepper import RodStepper

from .bench_files import write_experiment


def test_priming_leaves_the_state_and_the_trajectory_as_they_were(tmp_path):
    scenario = load_bench_experiment(write_experiment(tmp_path)).scenario
    plain, primed = RodStepper(scenario), RodStepper(scenario)
    before = (primed.state.q.copy(), primed.state.v.copy(), primed.state.t_s)
    primed.prime()
    assert np.array_equal(primed.state.q, before[0]) and np.array_equal(primed.state.v, before[1])
    assert primed.state.t_s == before[2] and primed.steps == 0 and primed.state.solver_cache is None
    for stepper in (plain, primed):
        stepper.add_waypoint(0.05, stepper.alpha + np.array([0, 0, 0, 0, 0, -0.001]))
        stepper.advance_to(0.05)
    assert plain.steps == primed.steps > 0
    assert np.array_equal(plain.state.q, primed.state.q)  # bit for bit: the primed step used a copy's own caches
    assert np.array_equal(plain.state.v, primed.state.v)


def test_the_base_pose_between_waypoints_is_np_interp_of_each_component(tmp_path):
    scenario = load_bench_experiment(write_experiment(tmp_path)).scenario
    stepper = RodStepper(scenario)
    rng = np.random.default_rng(3)
    times = np.cumsum(rng.uniform(0.001, 0.02, 60))
    for t, a in zip(times, rng.normal(size=(60, 6)), strict=True):
        stepper.add_waypoint(float(t), a)
    knots_t, knots_a = np.asarray(stepper._times), np.asarray(stepper._alphas)
    queries = np.concatenate([[-1.0, 0.0, times[-1], times[-1] + 1.0], times[:10], rng.uniform(-0.1, 1.5, 300)])
    for t in queries:
        expected = np.array([np.interp(t, knots_t, knots_a[:, i]) for i in range(6)])
        assert np.allclose(stepper.base_alpha_at(float(t)), expected, rtol=0, atol=1e-15), t
