"""A minimal dashboard-server client (TCP 29999, one line per command and per reply).

ur_rtde's Python wheel (1.6.5) binds ``RTDEControlInterface`` and ``RTDEReceiveInterface`` but not its
``DashboardClient``, and ``RTDEControlInterface.unlockProtectiveStop`` is not bound either, so the few
dashboard commands we need (unlock protective stop, safety status, close the safety popup) go through this
class. Protocol: UR's "Dashboard Server" manual; a welcome line on connect, then request/reply lines.
"""

from __future__ import annotations

import socket

from aiko.core.errors import HardwareError

DASHBOARD_PORT = 29999


class DashboardClient:
    """One connection to the dashboard server; ``command`` sends a line and returns the reply line."""

    def __init__(self, host: str, port: int = DASHBOARD_PORT, timeout_s: float = 2.0) -> None:
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as exc:
            raise HardwareError(f"cannot reach the UR dashboard server at {host}:{port}: {exc}") from None
        self._file = self._sock.makefile("rw", encoding="ascii", newline="\n")
        self.welcome = self._file.readline().strip()

    def command(self, line: str) -> str:
        try:
            self._file.write(line + "\n")
            self._file.flush()
            reply = self._file.readline()
        except OSError as exc:
            raise HardwareError(f"UR dashboard server: {exc}") from None
        if not reply:
            raise HardwareError("UR dashboard server closed the connection")
        return reply.strip()

    def unlock_protective_stop(self) -> None:
        reply = self.command("unlock protective stop")
        if reply != "Protective stop releasing":
            raise HardwareError(f"unlock protective stop refused: {reply}")

    def safety_status(self) -> str:
        return self.command("safetystatus").split(":", 1)[-1].strip()

    def close(self) -> None:
        try:
            self._file.close()
            self._sock.close()
        except OSError:
            pass

    def __enter__(self) -> DashboardClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
