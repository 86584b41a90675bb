import pytest

from aiko.core.errors import ConfigError
from aiko.robots.rod_bench.bench_experiment import load_bench_experiment
from aiko.robots.rod_bench.experiment import load_rod_experiment

from .bench_files import write_experiment

GOOD_UR3 = """
[ur3]
host = "192.168.1.10"
rtde_frequency_hz = 125.0
force_max_n = 20.0
workspace_min_m = [-0.4, -0.4, 0.1]
workspace_max_m = [0.0, 0.4, 0.4]

[bench]
control_rate_hz = 125.0
"""


def test_ur3_and_bench_tables_are_read_and_the_simulator_ignores_them(tmp_path):
    path = write_experiment(tmp_path, GOOD_UR3)
    experiment = load_bench_experiment(path)
    assert experiment.ur3.host == "192.168.1.10" and experiment.ur3.force_max_n == 20.0
    assert experiment.ur3.workspace_max_m == (0.0, 0.4, 0.4)
    assert experiment.bench.control_rate_hz == 125.0
    assert load_rod_experiment(path).name == "bench_stick"  # `aiko rod run` still reads a bench file


@pytest.mark.parametrize(
    "table, message",
    [
        ('[ur3]\nhost = "arm.local"\n', r"ur3.host: expected an IP address"),
        ("[ur3]\nspeed = 1.0\n", r"ur3.speed: unknown key; allowed keys here: .*tcp_speed_max_m_s"),
        ("[ur3]\ntcp_speed_max_m_s = 2.0\n", r"ur3.tcp_speed_max_m_s: 2.0 is out of range"),
        ("[ur3]\nworkspace_min_m = [0.5, 0, 0]\nworkspace_max_m = [0.4, 0.4, 0.4]\n", r"must lie below"),
        ("[ur3]\nservo_gain = 5000.0\n", r"ur3.servo_gain"),
        ("[ur3]\napproach_speed_m_s = 0.2\ntcp_speed_max_m_s = 0.1\n", r"approach_speed_m_s 0.2 is over"),
        ("[bench]\ncontrol_rate_hz = 0.0\n", r"bench.control_rate_hz"),
    ],
)
def test_bad_ur3_config_is_a_one_line_error(tmp_path, table, message):
    path = write_experiment(tmp_path, "\n" + table)
    with pytest.raises(ConfigError, match=message) as info:
        load_bench_experiment(path)
    assert "\n" not in str(info.value)
