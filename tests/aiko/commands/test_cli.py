"""The CLI: every bad input is one line on stderr and exit status 2; `gait show` writes the documented CSV."""

import csv
import math
import shutil
import subprocess
import sys

import numpy as np
import pytest

from aiko.cli import main
from aiko.robots.aiko.experiment import load_experiment
from tests.conftest import EXPERIMENTS, REPO

GOOD = """robot = "{robot}"
[gait]
preset = "sidewinding"
[run]
duration_s = 2.0
"""


@pytest.fixture
def robot_path(experiments_dir):
    return experiments_dir / "robots/aiko.toml"


def write_experiment(tmp_path, text):
    path = tmp_path / "exp.toml"
    path.write_text(text)
    return path


BAD_FILES = {
    "malformed TOML": ("[gait\npreset = 1", "malformed TOML"),
    "TOML nested 2000 deep (4 kB)": ("x = " + "[" * 2000 + "]" * 2000, "malformed TOML: arrays or tables nested too"),
    "inline tables nested 1000 deep": ("x = " + "{a = " * 1000 + "1" + "}" * 1000, "nested too deep to read"),
    "a run shorter than one reference period": (
        GOOD.replace("2.0", "1e-300"),
        "run.duration_s = 1e-300 s is shorter than one reference period (0.1 s",
    ),
    "unknown section": (GOOD + "[gaits]\nx = 1\n", "gaits: unknown section"),
    "unknown gait key": (
        GOOD.replace('preset = "sidewinding"', 'preset = "sidewinding"\namplitude = 3'),
        "gait.amplitude: unknown key",
    ),
    "unknown preset": (GOOD.replace('"sidewinding"', '"slithering"'), "is not one of"),
    "duration out of range": (GOOD.replace("2.0", "-1.0"), "run.duration_s: -1.0 is out of range"),
    "rate not a number": (GOOD + 'reference_rate_hz = "fast"\n', "run.reference_rate_hz: expected a number"),
    "amplitude beyond the joint limit": (
        GOOD.replace('preset = "sidewinding"', 'preset = "sidewinding"\namplitude_h_deg = 60'),
        "exceeds the horizontal joint limit",
    ),
    "negative frequency": (
        GOOD.replace('preset = "sidewinding"', 'preset = "sidewinding"\nfrequency_h_deg_s = -80'),
        "frequency_h_deg_s: must be finite and positive",
    ),
    "unknown default backend": (GOOD + '[backend]\ndefault = "warp"\n', "backend.default: 'warp' is not one of"),
    "unknown backend table": (GOOD + "[backend.warp]\nx = 1\n", "backend.warp: unknown backend"),
    "missing robot": ('[gait]\npreset = "sidewinding"\n', "robot: missing"),
    "robot file not found": (GOOD.replace("{robot}", "nowhere/robot.toml"), "robot description not found"),
    "relative robot path not found": (
        GOOD.replace("{robot}", "nowhere/robot.toml"),
        "a relative path is read from the experiment file's folder",
    ),
    "soft-start that never releases": (
        GOOD.replace(
            'preset = "sidewinding"',
            'preset = "sidewinding"\nsoft_start = true\namplitude_h_deg = 2\noffset_h_deg = 10',
        ),
        "at 0 forever",
    ),
    "frequency of 1e12 deg/s": (
        GOOD.replace('preset = "sidewinding"', 'preset = "sidewinding"\nfrequency_h_deg_s = 1e12'),
        "frequency_h_deg_s: 1e+12 deg/s is out of range",
    ),
    "phase step of 1e308 deg": (
        GOOD.replace('preset = "sidewinding"', 'preset = "sidewinding"\nphase_step_h_deg = 1e308'),
        "phase_step_h_deg: 1e+308 deg is out of range [-360, 360]",
    ),
    "gait faster than the joint modules": (
        GOOD.replace('preset = "sidewinding"', 'preset = "sidewinding"\nfrequency_h_deg_s = 1200'),
        "more than the 180 deg/s the joint modules",
    ),
    "robot is an empty string": (GOOD.replace("{robot}", ""), "robot: empty file name"),
    "robot is a directory": (GOOD.replace("{robot}", "/tmp"), "is a directory, not a file"),
    "robot is a device": (GOOD.replace("{robot}", "/dev/zero"), "is not a regular file"),
    "bad kinematic setting": (
        GOOD + "[backend.kinematic]\ntime_constant_s = 0\n",
        "time_constant_s: 0 is out of range",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_experiment_files_give_one_line_and_status_2(tmp_path, robot_path, capsys, case):
    text, message = BAD_FILES[case]
    path = write_experiment(tmp_path, text.replace("{robot}", str(robot_path)))
    assert main(["run", str(path), "--out", str(tmp_path / "log.mcap")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("aiko: "), err
    assert message in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["run", "does/not/exist.toml"], "experiment file not found"),
        (["run", "{exp}", "--backend", "warp"], "unknown backend 'warp'"),
        (["run", "{exp}", "--duration", "-3"], "--duration must be"),
        (["run", "{exp}", "--backend", "can", "--duration", "1e-300"], "--duration = 1e-300 s is shorter than one"),
        (["run", "{exp}", "--set", "novalue"], "expected KEY=VALUE"),
        (["gait", "show", "{exp}", "--csv", "{tmp}/g.csv", "--rate", "0"], "--rate must be"),
        (["gait", "show", "{exp}", "--csv", "/proc/forbidden/g.csv"], "cannot write"),
        (["gait", "show", "{exp}", "--csv", "{tmp}/g.csv", "--rate", "1e9"], "samples; at most"),
        (["run", "{exp}", "--backend", "kinematic", "--out", "{tmp}"], "cannot open log"),
        (["run", "{exp}", "--backend", "kinematic", "--live-screenshot", "/proc/forbidden/x.png"], "cannot write"),
        (["run", "{exp}", "--backend", "hil", "--rt-priority", "500"], "--rt-priority 500 is out of range [0, 99]"),
        (["run", "{exp}", "--backend", "can", "--bitrate", "0"], "--bitrate 0 is out of range"),
        (["run"], "the following arguments are required"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_command_lines_give_one_line_and_status_2(tmp_path, robot_path, capsys, argv, message):
    exp = write_experiment(tmp_path, GOOD.replace("{robot}", str(robot_path)))
    argv = [a.replace("{exp}", str(exp)).replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_the_papers_runs_load(experiments_dir):
    for name in ("sidewinding", "lateral_undulation_orthotropic", "lateral_undulation_isotropic"):
        experiment = load_experiment(experiments_dir / f"{name}.toml")
        assert experiment.robot.n_links == 11 and experiment.run.reference_rate_hz == 10.0


def test_gait_show_writes_the_documented_csv(tmp_path, experiments_dir):
    out = tmp_path / "refs.csv"
    plot = tmp_path / "refs.png"
    exp = experiments_dir / "sidewinding.toml"
    assert main(["gait", "show", str(exp), "--csv", str(out), "--plot", str(plot), "--duration", "3"]) == 0
    rows = list(csv.reader(out.open()))
    header = rows[0]
    assert header == ["t_s", *[f"alpha_h_{i}" for i in range(1, 11)], *[f"alpha_v_{i}" for i in range(1, 11)]]
    data = np.array(rows[1:], dtype=float)
    assert data.shape == (31, 21)
    np.testing.assert_allclose(data[:, 0], np.arange(31) / 10.0)
    gait = load_experiment(exp).gait
    for row in data:
        refs = gait.references(row[0])
        np.testing.assert_array_equal(row[1:11], refs.angle_h_rad)
        np.testing.assert_array_equal(row[11:], refs.angle_v_rad)
    assert np.all(np.abs(data[:, 1:]) <= math.radians(45))
    assert plot.stat().st_size > 10_000


def test_help_lists_every_command(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("run", "gait"):
        assert command in out


def test_experiment_copied_elsewhere_still_finds_its_robot(tmp_path, experiments_dir):
    shutil.copytree(experiments_dir / "robots", tmp_path / "robots")
    shutil.copy(experiments_dir / "sidewinding.toml", tmp_path)
    assert load_experiment(tmp_path / "sidewinding.toml").robot.name == "Aiko"


def test_a_run_that_fails_midway_ends_with_one_line_status_1_and_a_readable_log(tmp_path, capsys, experiments_dir):
    from aiko.core.registry import register_backend
    from aiko.log import LogReader
    from aiko.robots.aiko.backends.kinematic import KinematicBackend

    class BrokenPlant(KinematicBackend):
        def advance_to(self, t_s: float) -> None:
            super().advance_to(t_s)
            if t_s >= 0.5:
                raise FloatingPointError("plant diverged at t = 0.5 s")

    register_backend("test_broken", BrokenPlant, "raises mid-run (tests only)")
    out = tmp_path / "broken.mcap"
    argv = ["run", str(experiments_dir / "sidewinding.toml"), "--backend", "test_broken", "--out", str(out)]
    assert main([*argv, "--no-report"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "FloatingPointError: plant diverged at t = 0.5 s" in err
    log = LogReader(out)
    kinds = [e.kind for e in log.events() if e.kind in ("start", "error", "stop")]
    assert kinds == ["start", "error", "stop"]
    assert len(log.channel("/references")) == 5  # t = 0.0 … 0.4 s; the plant failed advancing to 0.5 s


@pytest.fixture(scope="module")
def short_log(tmp_path_factory):
    out = tmp_path_factory.mktemp("short") / "run.mcap"
    argv = ["run", str(EXPERIMENTS / "sidewinding.toml"), "--backend", "kinematic", "--duration", "0.3"]
    assert main([*argv, "--out", str(out), "--no-report"]) == 0
    return out


@pytest.mark.parametrize(
    "argv",
    [
        ["log", "export", "{log}", "--csv", "{file}"],  # a file where the CSV directory should be
        ["log", "recover", "{log}", "--out", "{tmp}"],  # a directory where the log should be
        ["log", "recover", "{log}", "--out", "/proc/forbidden/r.mcap"],
        ["report", "{log}", "--out", "/proc/forbidden/r.html"],
        ["report", "{log}", "--out", "/proc/forbidden/r.png"],
        ["replay", "{log}", "--out", "/proc/forbidden/r.mcap"],
    ],
)
def test_unwritable_outputs_give_one_line_and_status_2(tmp_path, capsys, short_log, argv):
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    argv = [
        a.replace("{log}", str(short_log)).replace("{file}", str(a_file)).replace("{tmp}", str(tmp_path)) for a in argv
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("aiko: cannot write "), err


@pytest.mark.parametrize("at", ["nan", "-1"])
def test_dashboard_rejects_a_bad_time_before_opening_a_window(capsys, short_log, at):
    assert main(["dashboard", str(short_log), "--screenshot", "x.png", "--at", at]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--at must be" in err, err


@pytest.mark.parametrize("argv", [["run", "{exp}", "--backend", "kinematic", "--live"], ["dashboard", "{log}"]])
def test_an_interactive_window_without_a_display_is_refused_not_left_waiting(
    tmp_path, robot_path, capsys, monkeypatch, short_log, argv
):
    """Offscreen, nobody can close the window: `--live` / `aiko dashboard LOG` would wait for ever."""
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
    exp = write_experiment(tmp_path, GOOD.replace("{robot}", str(robot_path)))
    argv = [a.replace("{exp}", str(exp)).replace("{log}", str(short_log)) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs a display" in err, err


def test_bus_flags_with_a_backend_that_has_no_real_bus_are_refused(capsys, experiments_dir):
    argv = ["run", str(experiments_dir / "sidewinding.toml"), "--backend", "hil", "--channel", "can0"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--channel select the real bus of --backend can" in err


def test_a_reader_that_closes_the_pipe_ends_the_command_quietly(tmp_path, experiments_dir):
    """`aiko log info LOG | head` must not end in a BrokenPipeError."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    log = tmp_path / "short.mcap"
    assert main(["run", str(experiments_dir / "sidewinding.toml"), "--duration", "0.5", "--out", str(log)]) == 0
    child = subprocess.Popen(
        [sys.executable, "-m", "aiko.cli", "log", "info", str(log)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    child.stdout.close()  # before the child has printed anything: its first write meets a closed pipe
    err = child.stderr.read().decode()
    assert child.wait(timeout=60) == 0 and err == "", err


@pytest.mark.parametrize(
    "override, message",
    [
        ("sim.obstacles.count=5000", "could not place 5000 obstacles"),
        ("sim.obstacles.radius_range_m=[0.05, 0.01]", "radius_range_m: need 0 < low <= high"),
    ],
)
def test_an_impossible_obstacle_field_is_a_config_error(tmp_path, capsys, override, message):
    exp = EXPERIMENTS / "obstacle_aided_unstructured.toml"
    assert main(["run", str(exp), "--set", override, "--out", str(tmp_path / "x.mcap")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_a_run_that_fails_before_it_starts_removes_its_stub_log_and_says_so(tmp_path, capsys, monkeypatch):
    import aiko.robots.aiko.run
    from aiko.core.errors import ConfigError

    def fail(*args, **kwargs):
        raise ConfigError("the bus is not there")

    monkeypatch.setattr(aiko.robots.aiko.run, "run_planned", fail)
    out = tmp_path / "run.mcap"
    assert main(["run", str(EXPERIMENTS / "sidewinding.toml"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == f"aiko: the bus is not there; nothing ran, so no log was kept ({out} removed)\n"
    assert not out.exists()


def test_a_run_that_fails_after_it_started_keeps_its_log_and_says_so(tmp_path, capsys, monkeypatch):
    import aiko.robots.aiko.run

    def fail(planned, recorder, **kwargs):
        recorder.event("start", planned.clock.now_ns(), duration_s=1.0)
        raise RuntimeError("the plant diverged")

    monkeypatch.setattr(aiko.robots.aiko.run, "run_planned", fail)
    out = tmp_path / "run.mcap"
    assert main(["run", str(EXPERIMENTS / "sidewinding.toml"), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the plant diverged" in err
    assert err.endswith(f"; the log up to the failure is kept: {out}\n")
    assert out.exists()


def test_the_program_exits_with_its_objects_frozen_and_its_files_still_flushed(tmp_path):
    """`entry_point` (the installed ``aiko``) freezes the objects left at exit, so the interpreter's shutdown does
    not walk numba's 100 000+ objects (0.33 s a process). Objects are still freed as the modules are cleared: a file
    a module holds open, its data still in its buffer, is complete on disk; the exit handlers run after the freeze."""
    out = tmp_path / "buffered.txt"
    code = (
        "import atexit, gc, sys\n"
        "from aiko import cli\n"
        f"log = open({str(out)!r}, 'w', buffering=1 << 20)\n"
        "log.write('all of it')\n"
        "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0, flush=True))\n"
        "sys.argv = ['aiko', '--version']\n"
        "cli.entry_point()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    from aiko import __version__

    assert done.stdout.splitlines() == [f"aiko {__version__}", "frozen True"]
    assert out.read_text() == "all of it"
