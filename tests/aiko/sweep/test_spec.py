"""Sweep files: lists, ranges, random and Latin-hypercube samples (reproducible from a seed), stable run ids, and
every bad input a one-line error."""

import numpy as np
import pytest

from aiko.core.errors import ConfigError
from aiko.sweep.spec import expand, load_spec, screen_runs, validate_runs

GRID = """
backend = "kinematic"
metrics = ["distance_m", "speed_m_s"]
[set]
"run.duration_s" = 5.0
[parameters]
"gait.amplitude_h_deg" = [20.0, 30.0, 40.0]
"gait.phase_step_h_deg" = { low = -70.0, high = -30.0, count = 5 }
[sampling]
kind = "grid"
"""


def test_the_issue_example_is_a_grid_of_15_runs_first_parameter_slowest(write_spec):
    spec = load_spec(write_spec(GRID))
    runs = expand(spec)
    assert len(runs) == 15
    assert [r.index for r in runs] == list(range(15))
    assert [r.params["gait.amplitude_h_deg"] for r in runs[:6]] == [20.0] * 5 + [30.0]
    assert [r.params["gait.phase_step_h_deg"] for r in runs[:5]] == [-70.0, -60.0, -50.0, -40.0, -30.0]
    assert spec.fixed == {"run.duration_s": 5.0}
    assert validate_runs(spec, runs) == "kinematic"
    assert len({r.run_id for r in runs}) == 15 and len({r.seed for r in runs}) == 15


def test_run_ids_and_seeds_stay_with_the_point_when_the_grid_grows(write_spec):
    small = expand(load_spec(write_spec(GRID)))
    bigger = expand(load_spec(write_spec(GRID.replace("[20.0, 30.0, 40.0]", "[10.0, 20.0, 30.0, 40.0]"), "b.toml")))
    assert len(bigger) == 20
    by_params = {tuple(r.params.values()): (r.run_id, r.seed) for r in bigger}
    for r in small:
        assert by_params[tuple(r.params.values())] == (r.run_id, r.seed)
    changed = expand(load_spec(write_spec(GRID.replace("5.0", "6.0"), "c.toml")))  # another fixed setting
    assert not {r.run_id for r in changed} & {r.run_id for r in small}


def test_equal_points_are_one_run(write_spec):
    runs = expand(load_spec(write_spec('[parameters]\n"gait.amplitude_h_deg" = [20.0, 20.0, 30.0]\n')))
    assert [r.params["gait.amplitude_h_deg"] for r in runs] == [20.0, 30.0]


def test_log_scale_and_integer_ranges_and_nested_set_tables(write_spec):
    spec = load_spec(
        write_spec(
            "[set.run]\nduration_s = 1.0\n[parameters]\n"
            '"sim.mu_rolling" = { low = 0.01, high = 1.0, count = 3, scale = "log" }\n'
            '"sim.max_iterations" = { low = 10, high = 20, count = 3, integer = true }\n'
        )
    )
    assert spec.fixed == {"run.duration_s": 1.0}
    runs = expand(spec)
    assert sorted({r.params["sim.mu_rolling"] for r in runs}) == pytest.approx([0.01, 0.1, 1.0])
    assert {r.params["sim.mu_rolling"] for r in runs} >= {0.01, 1.0}  # the ends exactly as written
    assert sorted({r.params["sim.max_iterations"] for r in runs}) == [10, 15, 20]
    assert all(isinstance(r.params["sim.max_iterations"], int) for r in runs)
    validate_runs(spec, runs)  # integers reach Table.integer as ints


SAMPLED = """
[parameters]
"gait.amplitude_h_deg" = {{ low = 10.0, high = 40.0 }}
"gait.phase_step_h_deg" = {{ low = -80.0, high = -20.0 }}
"gait.preset" = ["sidewinding", "lateral_undulation_isotropic"]
[sampling]
kind = "{kind}"
count = {count}
seed = {seed}
"""


@pytest.mark.parametrize("kind", ["random", "lhs"])
def test_samples_are_reproducible_from_the_seed_and_inside_the_ranges(write_spec, kind):
    def points(seed, name):
        return [r.params for r in expand(load_spec(write_spec(SAMPLED.format(kind=kind, count=12, seed=seed), name)))]

    a, b, c = points(7, "a.toml"), points(7, "b.toml"), points(8, "c.toml")
    assert a == b and a != c and len(a) == 12
    amp = np.array([p["gait.amplitude_h_deg"] for p in a])
    assert ((amp >= 10.0) & (amp <= 40.0)).all()
    assert {p["gait.preset"] for p in a} <= {"sidewinding", "lateral_undulation_isotropic"}


def test_latin_hypercube_puts_one_point_in_every_stratum_of_every_parameter(write_spec):
    n = 20
    spec = load_spec(write_spec(SAMPLED.format(kind="lhs", count=n, seed=3)))
    runs = expand(spec)
    validate_runs(spec, runs)  # every sampled point is a valid experiment
    for key, (lo, hi) in {"gait.amplitude_h_deg": (10.0, 40.0), "gait.phase_step_h_deg": (-80.0, -20.0)}.items():
        strata = sorted(int((r.params[key] - lo) / (hi - lo) * n) for r in runs)
        assert strata == list(range(n))
    presets = [r.params["gait.preset"] for r in runs]  # a list of 2 values over 20 strata: 10 each
    assert presets.count("sidewinding") == presets.count("lateral_undulation_isotropic") == n // 2


@pytest.mark.parametrize(
    "body, message",
    [
        ("", "parameters: missing required key"),
        ("[parameters]\n", "no swept setting"),
        ('[parameters]\n"gait.amplitude_h_deg" = { low = 1.0, high = 2.0 }\n', "a range on a grid needs a count"),
        ('[parameters]\n"gait.amplitude_h_deg" = { low = 3.0, high = 2.0, count = 2 }\n', "is below low"),
        ('[parameters]\n"gait.amplitude_h_deg" = { low = 1.0, high = 2.0, count = 2, step = 1 }\n', "unknown key"),
        ('[parameters]\n"gait.amplitude_h_deg" = []\n', "an empty list"),
        ('[parameters]\n"gait.amplitude_h_deg" = 20.0\n', "expected a list of values or a range"),
        ('metrics = ["speed"]\n[parameters]\n"gait.amplitude_h_deg" = [20.0]\n', "unknown metric 'speed'"),
        ('[set]\n"gait.amplitude_h_deg" = 1.0\n[parameters]\n"gait.amplitude_h_deg" = [20.0]\n', "fixed or swept"),
        ('[parameters]\n"gait.amplitude_h_deg" = [20.0]\n[sampling]\nkind = "sobol"\n', "is not one of"),
        ('[parameters]\n"gait.amplitude_h_deg" = { low = 1.0, high = 2.0 }\n[sampling]\nkind = "lhs"\n', "required"),
        (
            '[parameters]\n"gait.amplitude_h_deg" = { low = 1.0, high = 2.0, count = 3 }\n[sampling]\n'
            'kind = "random"\ncount = 4\n',
            "count belongs to grid ranges",
        ),
        ('[parameters]\n"gait.amplitude_h_deg" = [20.0]\n[sampling]\ncount = 4\n', "product of its parameters"),
        ('colour = "red"\n[parameters]\n"gait.amplitude_h_deg" = [20.0]\n', "colour: unknown key"),
    ],
)
def test_bad_spec_names_the_problem(write_spec, body, message):
    with pytest.raises(ConfigError, match=message):
        load_spec(write_spec(body))


@pytest.mark.parametrize(
    "body, message",
    [
        ('[parameters]\n"gait.amplitude_hh_deg" = [20.0]\n', r"run 0 \(gait.amplitude_hh_deg=20.0\).*unknown key"),
        ('[parameters]\n"gait.amplitude_h_deg" = [20.0, 80.0]\n', r"run 1 .*exceeds the horizontal joint limit"),
        ('[parameters]\n"sim.mu_transversal" = [-1.0]\n', r"sim.mu_transversal: -1.0 is out of range"),
        ('backend = "warp"\n[parameters]\n"gait.amplitude_h_deg" = [20.0]\n', "unknown backend 'warp'"),
        ('backend = "can"\n[parameters]\n"gait.amplitude_h_deg" = [20.0]\n', "sweeps run simulated backends only"),
    ],
)
def test_every_run_is_checked_like_aiko_run_set(write_spec, body, message):
    spec = load_spec(write_spec(body))
    with pytest.raises(ConfigError, match=message):
        validate_runs(spec, expand(spec))


def test_paths_are_relative_to_the_spec_file(tmp_path, experiments_dir):
    sub = tmp_path / "sweeps"
    sub.mkdir()
    (tmp_path / "exp.toml").write_text((experiments_dir / "sidewinding.toml").read_text().replace(
        '"robots/aiko.toml"', f'"{experiments_dir / "robots/aiko.toml"}"'
    ))  # fmt: skip
    path = sub / "s.toml"
    path.write_text('experiment = "../exp.toml"\nout = "results"\n[parameters]\n"gait.amplitude_h_deg" = [20.0]\n')
    spec = load_spec(path)
    assert spec.experiment_path.resolve() == (tmp_path / "exp.toml").resolve()
    assert spec.out == sub / "results"
    validate_runs(spec, expand(spec))


def test_screening_keeps_the_valid_runs_and_names_the_refused_ones(write_spec):
    spec = load_spec(write_spec('[parameters]\n"gait.amplitude_h_deg" = [20.0, 80.0, 30.0, 90.0]\n'))
    runs = expand(spec)
    backend, invalid = screen_runs(spec, runs)
    assert backend == "kinematic"
    assert list(invalid) == [runs[1].run_id, runs[3].run_id]
    assert invalid[runs[3].run_id].startswith(f"{spec.path}: run 3 (gait.amplitude_h_deg=90.0): ")
    with pytest.raises(ConfigError, match=r"run 1 \(gait.amplitude_h_deg=80.0\)"):
        validate_runs(spec, runs)
    typo = load_spec(write_spec('[parameters]\n"gait.amplitude_hh_deg" = [20.0, 30.0]\n', "typo.toml"))
    with pytest.raises(ConfigError, match=r"run 0 .*unknown key"):  # no valid run at all: an error of the file
        screen_runs(typo, expand(typo))
