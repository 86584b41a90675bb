"""The Vicon SDK client in its own process:
``python -m aiko.devices.vicon.client_child --host H --body SUBJECT/SEGMENT …``.

pyvicon-datastream's ``get_frame()`` holds the GIL while it waits for a frame (up to 1 s), so
:class:`aiko.devices.vicon.client.ViconMocap` runs it here, on this process's only thread, and reads one JSON line per
frame or connection event from the pipe. The first line says whether the first connection succeeded.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys

from aiko.core.errors import AikoError
from aiko.devices.vicon.client import ViconBody, ViconMocap, default_client_factory


def _write(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")  # NaN stays NaN: json reads it back
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", required=True, help="Vicon PC, host[:port]")
    parser.add_argument("--body", action="append", required=True, help="SUBJECT/SEGMENT to read (repeatable)")
    parser.add_argument("--reconnect-interval-s", type=float, default=1.0, help="seconds between reconnects")
    args = parser.parse_args(argv)
    bodies = [ViconBody(*b.split("/", 1)) for b in args.body]
    reader = ViconMocap(args.host, bodies, reconnect_interval_s=args.reconnect_interval_s, own_process=False)
    signal.signal(signal.SIGTERM, lambda *_: reader._stop.set())
    try:
        reader._client = default_client_factory()
    except AikoError as exc:
        _write({"connected": False, "error": str(exc)})
        return 1
    if not reader.connect_first():
        _write({"connected": False})
        return 1
    _write({"connected": True})
    reader.pop_events()  # the parent reports its own "connected"
    last = 0
    try:
        while not reader._stop.is_set():
            reader._step()
            for event in reader.pop_events():
                fields = {k: v for k, v in event.fields.items() if k != "host"}
                _write({"event": event.kind, "fields": fields})
            if reader.frames_received != last and reader._latest is not None:
                last = reader.frames_received
                f = reader._latest
                _write(
                    {
                        "frame": f.frame_number,
                        "latency_s": f.latency_s,
                        "position_m": f.position_m.tolist(),
                        "quaternion_wxyz": f.quaternion_wxyz.tolist(),
                        "occluded": f.occluded.tolist(),
                    }
                )
    except BrokenPipeError:  # the parent went away
        return 0
    finally:
        try:
            reader._client.disconnect()
        except Exception:  # noqa: BLE001 - already gone
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
