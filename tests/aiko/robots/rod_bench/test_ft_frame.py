"""The F/T sensor's mounting between flange and rod: a reading moved from the sensor's frame to the flange frame at
the rod's base (force rotated, torque rotated plus the lever arm r × F), checked by hand and by round trips."""

import numpy as np
import pytest

from aiko.core.errors import ConfigError
from aiko.robots.rod_bench.bench_experiment import load_bench_experiment
from aiko.robots.rod_bench.ft_frame import SensorMount
from aiko.robots.rod_bench.ft_sensor import FTSensorTask, PlantSensor, mount_of
from aiko.robots.rod_bench.sensor_settings import FTSensorSettings

from .bench_files import write_experiment

# a HEX 5 cm behind the rod's base (towards the flange), turned 90° about the tool axis
HEX = SensorMount.from_settings([0.0, 0.0, -0.05], [0.0, 0.0, 90.0])


def test_hand_computed_case():
    # the sensor's x is the flange's y: 1 N along the sensor's x is 1 N along the flange's y; its own 0.1 N·m about
    # z stays about z; the force acts through the sensor's origin 5 cm below the base: r × F = (−0.05 ẑ) × ŷ = +0.05 x̂
    moved = HEX.to_flange([1.0, 0.0, 0.0, 0.0, 0.0, 0.1])
    np.testing.assert_allclose(moved, [0.0, 1.0, 0.0, 0.05, 0.0, 0.1], atol=1e-15)
    np.testing.assert_allclose(HEX.from_flange(moved), [1.0, 0.0, 0.0, 0.0, 0.0, 0.1], atol=1e-15)


def test_a_force_through_the_rods_base_has_no_moment_about_it_but_the_offset_sensor_feels_one():
    force = np.array([0.3, -0.2, 2.0])  # on the tool, through the base point (the flange frame's origin)
    reading = HEX.from_flange([*force, 0.0, 0.0, 0.0])
    # the sensor measures about its own origin r: (0 − r) × F, in its axes
    expected_torque = HEX.rotation_matrix.T @ np.cross(-HEX.offset_m, force)
    np.testing.assert_allclose(reading[3:6], expected_torque, atol=1e-15)
    assert np.linalg.norm(reading[3:6]) > 0.01
    np.testing.assert_allclose(HEX.to_flange(reading), [*force, 0.0, 0.0, 0.0], atol=1e-15)


def test_round_trips_for_any_mounting():
    rng = np.random.default_rng(4)
    for _ in range(20):
        mount = SensorMount.from_settings(rng.uniform(-0.2, 0.2, 3), rng.uniform(-180, 180, 3))
        w = rng.normal(size=6)
        np.testing.assert_allclose(mount.from_flange(mount.to_flange(w)), w, atol=1e-12)
        np.testing.assert_allclose(mount.to_flange(mount.from_flange(w)), w, atol=1e-12)
        # the force keeps its length, the moved torque is not the rotated one (the lever arm is there)
        assert np.linalg.norm(mount.to_flange(w)[0:3]) == pytest.approx(np.linalg.norm(w[0:3]))


def test_settings_are_strict_and_default_to_no_transform(tmp_path):
    for extra, match in (
        ("\n[ft_sensor]\noffset_m = [0.0, 0.05]\n", "ft_sensor.offset_m: expected 3 numbers"),
        ("\n[ft_sensor]\noffset_m = [0.0, 0.0, 2.0]\n", "ft_sensor.offset_m"),
        ("\n[ft_sensor]\nrotation_deg = [0.0, 0.0, 400.0]\n", "ft_sensor.rotation_deg"),
        ('\n[ft_sensor]\nrotation_deg = "z90"\n', "ft_sensor.rotation_deg: expected a list of numbers"),
    ):
        with pytest.raises(ConfigError, match=match):
            load_bench_experiment(write_experiment(tmp_path, extra))
    table = "\n[ft_sensor]\noffset_m = [0.0, 0.0, -0.05]\nrotation_deg = [0.0, 0.0, 90.0]\n"
    ft = load_bench_experiment(write_experiment(tmp_path, table)).ft_sensor
    np.testing.assert_allclose(mount_of(ft).to_flange([1, 0, 0, 0, 0, 0.1]), HEX.to_flange([1, 0, 0, 0, 0, 0.1]))
    assert mount_of(FTSensorSettings()).is_identity and not mount_of(ft).is_identity


class _Sample:
    def __init__(self, w):
        self.force_n, self.torque_nm, self.sequence, self.t_ns, self.saturated = w[0:3], w[3:6], 1, 0, False

    def as_tuple(self):
        return (*self.force_n, *self.torque_nm)


class _Reader:
    def __init__(self, samples):
        self.samples = samples

    def drain(self):
        return self.samples


def test_the_task_logs_the_moved_wrench_and_the_raw_reading_and_the_plant_feeds_the_inverse():
    settings = FTSensorSettings(offset_m=(0.0, 0.0, -0.05), rotation_deg=(0.0, 0.0, 90.0))
    task = FTSensorTask(
        _Reader([_Sample((1.0, 0.0, 0.0, 0.0, 0.0, 0.1)), _Sample((3.0, 0.0, 0.0, 0.0, 0.0, 0.1))]), settings
    )
    payload = task.sample(0.0)
    np.testing.assert_allclose(payload["force_n"] + payload["torque_nm"], [0, 3, 0, 0.15, 0, 0.1], atol=1e-15)
    np.testing.assert_allclose(payload["force_mean_n"] + payload["torque_mean_nm"], [0, 2, 0, 0.1, 0, 0.1], atol=1e-15)
    assert payload["sensor_force_n"] == [3.0, 0.0, 0.0]
    # HIL: the plant hands the emulated sensor what the mounted sensor reads; the task moves it back
    plant = PlantSensor(mount_of(settings))
    plant.update([0.0, 3.0, 0.0, 0.15, 0.0, 0.1])
    np.testing.assert_allclose(plant(0.0), [3.0, 0.0, 0.0, 0.0, 0.0, 0.1], atol=1e-15)
