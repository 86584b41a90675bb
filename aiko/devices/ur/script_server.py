"""The script ports (TCP 30001-30003): URScript in, nothing out.

A controller runs a script sent to these ports as a secondary program. The emulator does not interpret URScript:
an upload of ur_rtde's control script (``def rtde_control():``) starts the emulated register protocol
(:mod:`aiko.devices.ur.control_script`); any other script is reported as not run (a text message to every RTDE
client and an event), so a client waiting for its effect sees nothing happen rather than a pretence.

A script ends where the sender pauses: ur_rtde writes its script in one ``write`` and keeps the connection open,
so a script is whatever arrived before 50 ms of silence (or the connection's end).

The real controller's state streams on these ports (primary / secondary / real-time packages) are not sent: the
ur_rtde client does not read them.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

SCRIPT_PORTS = (30001, 30002, 30003)
SCRIPT_QUIET_S = 0.05


def serve(sock: socket.socket, running: threading.Event, received: Callable[[str], None]) -> None:
    """One sender: each script it sends (see the module docstring) goes to ``received``."""
    buffer = bytearray()
    sock.settimeout(SCRIPT_QUIET_S)
    try:
        while running.is_set():
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                if buffer:
                    received(buffer.decode(errors="replace"))
                    buffer.clear()
                continue
            if not chunk:
                break
            buffer.extend(chunk)
        if buffer:
            received(buffer.decode(errors="replace"))
    except OSError:
        pass
    finally:
        sock.close()
