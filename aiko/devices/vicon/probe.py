"""Read a DataStream server with the real Vicon SDK client and print what it saw as JSON (tests, benchmarks, and
"is the Vicon PC reachable?" in a lab).

    python -m aiko.devices.vicon.probe --host 127.0.0.5:801 --mode ServerPush --duration-s 2 --body aiko/link6

A frame holds only the object types the client had asked for when the server sent it, and the SDK sends its
request (``Enable…Data``) from its reader thread only after the next packet has arrived (``ViconCGStreamClient.cpp``,
``ClientThread``: ``WriteObjects`` then ``ReadObjects``); so the first frame(s) of each connection may read every
segment and marker as occluded (None here), against a Tracker as against the emulator. ``connection`` in each
frame says which connection it came on.

Runs alone in its process on purpose: ``get_frame()`` holds the GIL while it waits. A dropped connection is
retried at once (the SDK's ``get_frame`` has already waited 1 s when it reports it) and logged in ``reconnects``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any


def _value(result: Any) -> int:
    return int(getattr(result, "value", result))


def _list(a: Any) -> list[float] | None:
    return None if a is None else [float(v) for v in list(getattr(a, "flat", a))]


def probe(host: str, mode: str, duration_s: float, bodies: list[str], markers: list[str]) -> dict[str, Any]:
    import pyvicon_datastream as pv

    client = pv.PyViconDatastream()
    t_start = time.time()
    connected = _value(client.connect(host)) == _value(pv.Result.Success)
    out: dict[str, Any] = {"connected": connected, "mode": mode, "frames": [], "reconnects": [], "names": {}}
    if not connected:
        return out

    def configure() -> None:
        client.enable_segment_data()
        client.enable_marker_data()
        client.set_stream_mode(getattr(pv.StreamMode, mode))

    configure()
    lost_at = None
    while time.time() - t_start < duration_s:
        result = _value(client.get_frame())
        received = time.time()
        if result != _value(pv.Result.Success):
            if not client.is_connected():
                lost_at = lost_at or received
                if _value(client.connect(host)) == _value(pv.Result.Success) or client.is_connected():
                    configure()
                    out["reconnects"].append({"lost_unix_s": lost_at, "connected_unix_s": time.time()})
                    lost_at = None
                else:
                    time.sleep(0.05)
            continue
        frame: dict[str, Any] = {
            "number": int(client.get_frame_number()),
            "connection": len(out["reconnects"]),  # 0, then 1 after the first reconnect, ...
            "received_unix_s": received,
            "latency_total_s": float(client.get_latency_total()),
        }
        for body in bodies:
            subject, segment = body.split("/", 1)
            frame[body] = {
                "translation_mm": _list(client.get_segment_global_translation(subject, segment)),
                "rotation": _list(client.get_segment_global_rotation_matrix(subject, segment)),
                "quaternion_wxyz": _list(client.get_segment_global_quaternion(subject, segment)),
                "local_translation_mm": _list(client.get_segment_local_translation(subject, segment)),
            }
        for marker in markers:
            subject, name = marker.split("/", 1)
            frame[marker] = _list(client.get_marker_global_translation(subject, name))
        out["frames"].append(frame)
        if not out["names"]:
            out["frame_rate_hz"] = float(client.get_frame_rate())
            subjects = [client.get_subject_name(i) for i in range(int(client.get_subject_count()))]
            out["names"] = {
                s: {
                    "root": client.get_subject_root_segment_name(s),
                    "segments": [client.get_segment_name(s, i) for i in range(int(client.get_segment_count(s)))],
                    "markers": [client.get_marker_name(s, i) for i in range(int(client.get_marker_count(s)))],
                }
                for s in subjects
            }
    client.disconnect()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", required=True, help="host[:port] of the DataStream server")
    p.add_argument("--mode", default="ServerPush", choices=("ClientPull", "ClientPullPreFetch", "ServerPush"))
    p.add_argument("--duration-s", type=float, default=2.0, help="how long to read")
    p.add_argument("--body", action="append", default=[], help="SUBJECT/SEGMENT whose poses to record")
    p.add_argument("--marker", action="append", default=[], help="SUBJECT/MARKER whose positions to record")
    args = p.parse_args(argv)
    json.dump(probe(args.host, args.mode, args.duration_s, args.body, args.marker), sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
