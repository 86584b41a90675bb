"""``aiko emulate ur3``: bad options are one-line errors before anything binds."""

import pytest

from aiko.cli import main
from aiko.core.errors import ConfigError
from aiko.devices.ur.plants import SpringFloor, load_plant


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--host", "10.1.2.3"], "--host must be a loopback address"),
        (["--host", "localhost"], "--host must be an IP address"),
        (["--host", "127.0.0.90", "--rate-hz", "5"], "--rate-hz must lie in [10, 1000]"),
        (["--host", "127.0.0.90", "--workspace", "0", "0", "0", "1", "1", "-1"], "--workspace needs each minimum"),
        (["--host", "127.0.0.90", "--plant", "nocolon"], "--plant must look like MODULE:FACTORY"),
        (["--host", "127.0.0.90", "--plant", "aiko.devices.ur.plants:nothing"], "has no callable nothing"),
    ],
)
def test_bad_options_are_one_line_errors(argv, message, capsys):
    assert main(["emulate", "ur3", *argv]) == 2
    assert message in capsys.readouterr().err


def test_plant_spec_loads_the_factory():
    assert isinstance(load_plant("aiko.devices.ur.plants:spring_floor"), SpringFloor)
    with pytest.raises(ConfigError, match="cannot import"):
        load_plant("aiko.no_such_module:x")


def test_an_address_in_use_is_a_one_line_error():
    import subprocess
    import sys

    from .ur3_emulator_process import REPO, running

    with running("127.0.0.69"):
        second = subprocess.run(
            [sys.executable, "-m", "aiko.cli", "emulate", "ur3", "--host", "127.0.0.69", "--duration", "1"],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=60,
        )
    assert second.returncode == 2
    assert "cannot bind 127.0.0.69:30004" in second.stderr
    assert "Traceback" not in second.stderr
