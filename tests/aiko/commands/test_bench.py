"""`aiko bench run|replay|compare` in-process (sim backend), and one-line errors for a bad [ur3] table."""

import json

import pytest

from aiko.cli import main
from tests.aiko.robots.rod_bench.bench_files import write_experiment


def _json(capsys):
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_bench_run_replay_compare_on_the_simulator(tmp_path, capsys):
    path = write_experiment(tmp_path)
    log = tmp_path / "run.mcap"
    assert main(["bench", "run", str(path), "--backend", "sim", "--out", str(log), "--duration", "0.1", "--json"]) == 0
    summary = _json(capsys)
    assert summary["backend"] == "sim" and summary["rod_steps"] == 20 and summary["log_path"] == str(log)
    assert summary["messages"]["/bench/command"] == 11 and summary["messages"]["/sim/rod/centreline"] == 6
    replay = tmp_path / "replay.mcap"
    assert main(["bench", "replay", str(log), "--out", str(replay), "--json"]) == 0
    assert _json(capsys)["replay_of"] == str(log)
    plot = tmp_path / "cmp.png"
    assert main(["bench", "compare", str(replay), str(log), "--json", "--plot", str(plot)]) == 0
    out = _json(capsys)
    assert out["strain_error_percent"] < 1e-6 and out["normal_force_error_percent"] < 1e-6
    assert plot.stat().st_size > 10_000


@pytest.mark.parametrize(
    "table, message",
    [
        ('[ur3]\nhost = "not-an-ip"\n', "ur3.host: expected an IP address"),
        ("[ur3]\nforce_max_n = -1.0\n", "ur3.force_max_n"),
        ("[ur3]\nport = 30004\n", "ur3.port: unknown key"),
    ],
)
def test_bad_ur3_table_is_one_line_on_stderr(tmp_path, capsys, table, message):
    path = write_experiment(tmp_path, "\n" + table)
    assert main(["bench", "run", str(path), "--backend", "sim", "--out", str(tmp_path / "x.mcap")]) != 0
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_real_backend_without_host_is_one_line(tmp_path, capsys):
    path = write_experiment(tmp_path)
    assert main(["bench", "run", str(path), "--backend", "real", "--out", str(tmp_path / "x.mcap")]) != 0
    err = capsys.readouterr().err.strip()
    assert "needs [ur3] host" in err and len(err.splitlines()) == 1


def test_compare_of_a_non_bench_log_is_one_line(tmp_path, capsys):
    bogus = tmp_path / "x.mcap"
    bogus.write_bytes(b"not an mcap")
    assert main(["bench", "compare", str(bogus), str(bogus)]) != 0
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--backend", "hil", "--rt-priority", "100"], "--rt-priority must lie in 0..99, got 100"),
        (["--backend", "sim", "--rt-priority", "5"], "--rt-priority raises the emulated controller"),
    ],
)
def test_a_bad_rt_priority_is_one_line_and_writes_no_log(tmp_path, capsys, argv, message):
    log = tmp_path / "run.mcap"
    assert main(["bench", "run", str(write_experiment(tmp_path)), "--out", str(log), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not log.exists()
