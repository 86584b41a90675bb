"""What a user's command loads: the HIL job (the one ``make run`` runs) and a simulated bench run must not pay for
scipy subpackages they never call. scipy.spatial, scipy.integrate and scipy.optimize each cost a fresh process
0.1-0.4 s of start-up (``python -X importtime``), a large share of a job that simulates 15 s in a few; the modules
that need them import them where they are used. (scipy.linalg and scipy.sparse are not on the list: numba imports
scipy.linalg's BLAS as it loads any cached kernel that uses numpy's linear algebra.)"""

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO

HEAVY_SCIPY = ("scipy.spatial", "scipy.integrate", "scipy.optimize")


@pytest.mark.parametrize(
    "command",
    [
        ["run", "experiments/sidewinding_hil.toml", "--no-report", "--duration", "0.3"],
        ["bench", "run", "experiments/rod/bench_stick.toml", "--backend", "sim", "--duration", "0.05"],
    ],
    ids=["aiko-run-hil", "aiko-bench-run-sim"],
)
def test_the_command_runs_without_importing_heavy_scipy_subpackages(tmp_path, command):
    argv = [*command, "--out", str(tmp_path / "run.mcap")]
    code = (
        "import json, sys\n"
        "from aiko.cli import main\n"
        f"rc = main({argv!r})\n"
        f"heavy = sorted({{'.'.join(m.split('.')[:2]) for m in sys.modules if m.startswith({HEAVY_SCIPY!r})}})\n"
        "print(json.dumps({'rc': rc, 'heavy': heavy}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"rc": 0, "heavy": []}


def test_the_version_is_answered_without_loading_the_commands():
    """``aiko --version`` printed its one line after importing every command's module (1.9 s); argparse's own
    ``--version`` answer is the same text."""
    code = (
        "import contextlib, io, json, sys\n"
        "from aiko.cli import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    rc = main(['--version'])\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('aiko.commands.'))\n"
        "print(json.dumps({'rc': rc, 'out': out.getvalue(), 'loaded': loaded}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["rc"] == 0 and result["loaded"] == []
    from aiko import __version__

    assert result["out"] == f"aiko {__version__}\n"
    import contextlib
    import io

    from aiko.cli import build_parser

    argparse_answer = io.StringIO()
    with contextlib.redirect_stdout(argparse_answer), pytest.raises(SystemExit):
        build_parser(["--version"]).parse_args(["--version"])
    assert argparse_answer.getvalue() == result["out"]


@pytest.mark.parametrize("argv", [["--help"], [], ["no-such-command"]], ids=["--help", "nothing", "unknown"])
def test_the_command_list_is_answered_without_loading_the_commands(argv):
    """``aiko --help`` imported every command's module to list them (1 s): the list now comes from
    `aiko.commands.SUMMARIES`, the help each command's parser takes, and is the text the full parser prints
    (the same for the usage line of ``aiko`` alone and the error of an unknown command)."""
    code = (
        "import contextlib, io, json, sys\n"
        "from aiko.cli import main\n"
        "out, err = io.StringIO(), io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):\n"
        f"    rc = main({argv!r})\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('aiko.commands.'))\n"
        "print(json.dumps({'rc': rc, 'out': out.getvalue(), 'err': err.getvalue(), 'loaded': loaded}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    light = json.loads(done.stdout.strip().splitlines()[-1])
    assert light["loaded"] == []
    import contextlib
    import io

    from aiko.cli import build_parser

    full = build_parser()  # every command's module and parser
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            args = full.parse_args(argv)
        except SystemExit as exc:
            rc = int(exc.code or 0)
        else:
            full.print_help()
            rc = 2 if args.command is None else 0
    assert (light["rc"], light["out"], light["err"]) == (rc, out.getvalue(), err.getvalue())
    assert light["out"] or light["err"]
