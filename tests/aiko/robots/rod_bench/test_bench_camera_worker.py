"""The HIL camera filming live: a worker process follows the plant's side file as it is written and records what
filming the same states after the run records, to the last bit."""

import json
import time

from aiko.core.clock import SimulatedClock
from aiko.robots.rod_bench.bench_experiment import load_bench_experiment
from aiko.robots.rod_bench.camera import HilCamera
from aiko.robots.rod_bench.sensor_task import FinishedRun

from .bench_files import simulated_rod_states, write_experiment

CAMERA = '\n[camera]\nsource = "synthetic"\nrate_hz = 50.0\nmarkers = 6\n'
ZERO_S = 1234.5  # the controller's time at the run's time 0
DURATION_S = 0.1


class _ListRecorder:
    def __init__(self):
        self.records = []

    def record(self, channel, t_ns, payload):
        self.records.append((channel.topic, t_ns, payload))


def _line(t_s, payload):
    return json.dumps({"controller_time_s": ZERO_S + t_s, "channels": {"/sim/rod/state": payload}}) + "\n"


def test_the_live_camera_films_the_side_file_as_it_is_written_and_records_what_filming_after_would(tmp_path):
    """The plant's lines arrive one by one (one of them in two writes), among them a state from before the run's
    time 0 and one after its end, an event, the plant's timing and a line that is not JSON. The worker has made
    records before the last states are written (it films during the run), and the bench records its frames —
    stamped on the run's clock — exactly as filming the run's states after it would."""
    experiment = load_bench_experiment(write_experiment(tmp_path, CAMERA))
    states = simulated_rod_states(experiment, DURATION_S + 0.04)  # two states past the run's end
    clock = SimulatedClock()
    clock.zero_s = ZERO_S  # as the bench's ControllerClock
    side_file = tmp_path / "plant_rod.jsonl"
    side_file.write_text("")
    live = HilCamera(experiment, live=True)
    live.open()
    live.follow(side_file, clock, DURATION_S)
    with side_file.open("a") as plant:
        plant.write(_line(-0.02, {"t_s": -0.02, "q": states[0][1]["q"]}))  # the rod mounted before t = 0
        plant.write(json.dumps({"controller_time_s": ZERO_S, "event": "rod mounted"}) + "\n")
        half = len(states) // 2
        for index, (t_s, payload) in enumerate(states):
            line = _line(t_s, payload)
            if index == 1:  # a line the worker meets half written
                plant.write(line[:40])
                plant.flush()
                time.sleep(0.05)
                plant.write(line[40:])
            else:
                plant.write(line)
            if index == 2:
                plant.write('{"plant_timing": {"median_s": 0.001}}\n{"cut by a stop\n')
            plant.flush()
            if index == half:  # the first frames are filmed while the plant still writes
                deadline = time.monotonic() + 120.0
                while not live._worker.records and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert live._worker.records, live._worker.errors
    live.close()  # the backend closed: the file is complete

    # what the bench passes `finish`: the states on the run's time, as `bench_run._rod_states` reads them back
    run_states = []
    for t_s, payload in states:
        t_run = float(json.loads(_line(t_s, payload))["controller_time_s"]) - ZERO_S
        if 0.0 <= t_run <= DURATION_S + 1e-9:
            run_states.append((t_run, {**payload, "t_s": t_run}))
    run = FinishedRun(run_states)
    live_recorder, after_recorder = _ListRecorder(), _ListRecorder()
    live.finish(run, live_recorder, clock)
    after = HilCamera(experiment)
    after.open()
    after.finish(run, after_recorder, clock)
    assert live.stats["filmed"] == "live" and after.stats["filmed"] == "after the close"
    assert live.stats["frames"] == after.stats["frames"] == len(run_states) == 6
    assert live_recorder.records == after_recorder.records
    assert len(live_recorder.records) == 2 * len(run_states)
    assert {k: v for k, v in live.stats.items() if k not in ("filmed", "offline_wall_s")} == {
        k: v for k, v in after.stats.items() if k not in ("filmed", "offline_wall_s")
    }


def test_a_live_camera_that_never_followed_a_run_ends_and_the_bench_films_itself(tmp_path):
    """A run that ended before its clock was known (nothing followed): the worker ends when told, and `finish`
    films the states in the bench's process."""
    experiment = load_bench_experiment(write_experiment(tmp_path, CAMERA))
    states = simulated_rod_states(experiment, DURATION_S)
    camera, recorder = HilCamera(experiment, live=True), _ListRecorder()
    camera.close()
    camera.finish(FinishedRun(states), recorder, SimulatedClock())
    assert camera.stats["filmed"] == "after the close" and camera.stats["frames"] == len(states)
    assert camera._worker.proc.poll() is not None


def test_the_bench_waits_for_a_live_camera_only_when_that_is_sooner_than_filming_itself():
    """200 frames at 14 ms of CPU each: the bench would film them in 200 x 14 ms x 0.6 = 1.7 s. A worker 20 frames
    behind at 100 frames/s (0.2 s) is waited for; one 150 behind at 5 frames/s (30 s: starved beside other work)
    is not, nor one with no frame in the last half second; one within five frames of the end always is."""
    from aiko.robots.rod_bench.camera_worker_client import worth_waiting_for

    def worker(done, frames_per_s, now=100.0):
        times = [now - k / frames_per_s for k in range(done)][::-1]
        return [0.014 * k for k in range(done)], times

    assert worth_waiting_for(200, *worker(180, 100.0), 100.0)
    assert not worth_waiting_for(200, *worker(50, 5.0), 100.0)
    cpu, times = worker(150, 100.0, now=90.0)  # nothing since 10 s ago
    assert not worth_waiting_for(200, cpu, times, 100.0)
    assert worth_waiting_for(200, *worker(196, 0.1), 100.0)
    assert not worth_waiting_for(200, [], [], 100.0)
