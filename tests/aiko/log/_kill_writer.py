"""Child process for the SIGKILL test: records like an HIL run until killed.

Rates as on Aiko: mocap 20 Hz, references 10 Hz, joint feedback 100 Hz. After handing each message to the
recorder it prints "topic seq t_ns" so the parent knows exactly what was recorded before the kill.
"""

import sys
import time

import numpy as np

from aiko.log import McapRecorder
from tests.aiko.log._channels import KILL_TEST_CHANNELS

path = sys.argv[1]
rates_hz = {"/test/mocap": 20.0, "/test/references": 10.0, "/test/joint_feedback": 100.0}
n_joints = 10
with McapRecorder(path, {"experiment": "kill-test"}, 1.0) as rec:  # the default of [log] flush_interval_s
    t0 = time.monotonic_ns()
    rec.event("start", t0, duration_s=60.0)
    rec.flush()
    print("ready", flush=True)
    next_ns = {topic: t0 for topic in rates_hz}
    seq = dict.fromkeys(rates_hz, 0)
    while True:
        topic = min(next_ns, key=next_ns.get)
        wait_ns = next_ns[topic] - time.monotonic_ns()
        if wait_ns > 0:
            time.sleep(wait_ns * 1e-9)
        t_ns = time.monotonic_ns()
        k = seq[topic]
        phase = 0.1 * k + np.arange(n_joints)
        if topic == "/test/mocap":
            payload = {
                "seq": k,
                "position_m": [np.sin(0.1 * k), np.cos(0.1 * k), 0.05],
                "occluded": k % 7 == 3,
            }
        else:
            payload = {"seq": k, "angle_h_rad": np.sin(phase), "angle_v_rad": np.cos(phase)}
        rec.record(KILL_TEST_CHANNELS[topic], t_ns, payload)
        print(topic, k, t_ns, flush=True)
        seq[topic] = k + 1
        next_ns[topic] += int(1e9 / rates_hz[topic])
