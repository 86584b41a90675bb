"""RodStepper.prime: the kernels load before a run's clock starts, and the trajectory is the one it would have been."""

import numpy as np

from aiko.robots.rod_bench import rod_stepper
from aiko.robots.rod_bench.bench_experiment import load_bench_experiment
from aiko.robots.rod_bench.rod_stepper import PRIMED_POSE_TOLERANCE, RodStepper

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


def _held_run(stepper: RodStepper, offset: float, steps: int) -> None:
    """The base held at the start pose moved by `offset` in every component, for `steps` steps."""
    stepper.add_waypoint(stepper.dt_s * 1e-3, stepper.alpha + offset)  # held there from the first step on
    stepper.advance_to(stepper.dt_s * steps)


def _count_steps(monkeypatch) -> list[int]:
    calls = [0]
    real_step = rod_stepper.step

    def counted(*args, **kwargs):
        calls[0] += 1
        return real_step(*args, **kwargs)

    monkeypatch.setattr(rod_stepper, "step", counted)
    return calls


def test_the_first_step_with_the_base_held_is_the_primed_one_not_solved_again(tmp_path, monkeypatch):
    """A held start (the HIL arm at rest) takes the step `prime` solved: one step fewer solved in the run (the first,
    halved twice on this rod, was the quiet HIL run's late tick), the same trajectory to the last bit."""
    scenario = load_bench_experiment(write_experiment(tmp_path)).scenario
    plain, primed = RodStepper(scenario), RodStepper(scenario)
    primed.prime()
    calls = _count_steps(monkeypatch)
    _held_run(plain, 0.0, 6)
    solved_plain = calls[0]
    _held_run(primed, 0.0, 6)
    assert solved_plain == 6 and calls[0] - solved_plain == 5
    assert plain.halved_steps == primed.halved_steps and plain.newton_iterations == primed.newton_iterations
    assert np.array_equal(plain.state.q, primed.state.q) and np.array_equal(plain.state.v, primed.state.v)
    assert np.array_equal(plain.state.slack, primed.state.slack) and plain.state.t_s == primed.state.t_s
    assert np.array_equal(plain.info.base_wrench, primed.info.base_wrench)


def test_a_base_off_the_primed_pose_is_solved_as_usual(tmp_path, monkeypatch):
    """Within the tolerance (the arm's kinematic round-off, 1e-11 measured) the primed step is taken; a base a
    micrometre off is another step and is solved; the primed step is offered to the first step only."""
    scenario = load_bench_experiment(write_experiment(tmp_path)).scenario
    calls = _count_steps(monkeypatch)
    for offset, solved in ((0.1 * PRIMED_POSE_TOLERANCE, 3), (1e-6, 4)):
        stepper = RodStepper(scenario)
        stepper.prime()
        calls[0] = 0
        _held_run(stepper, offset, 4)
        assert calls[0] == solved, offset
    late = RodStepper(scenario)
    late.prime()
    late.add_waypoint(late.dt_s * 1e-3, late.alpha + 1e-6)  # the first step off the pose: solved, primed dropped
    late.add_waypoint(late.dt_s * 3, late.alpha)  # back at the primed pose: no longer the first step
    calls[0] = 0
    late.advance_to(late.dt_s * 3)
    assert calls[0] == 3 and late._primed_first_step is None


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
