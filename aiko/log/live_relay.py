"""The older ``foxglove.websocket.v1`` subprotocol in front of the foxglove-sdk server, for the apps that speak only it.

foxglove-sdk's server accepts only the ``foxglove.sdk.v1`` subprotocol and refuses every other handshake with HTTP
400 (``rust/foxglove/src/websocket/handshake.rs``: one constant, no option). Foxglove Studio 1.x, Lichtblick before
v1.22.0 (its ``foxglove.sdk.v1`` support is PR #819, December 2025) and ``@foxglove/ws-protocol``'s own client offer
only ``foxglove.websocket.v1``. The two are the same protocol under two names (Foxglove's stance in
foxglove/discussions #1131; Lichtblick added the new name and changed nothing else), so this relay accepts
``foxglove.websocket.v1`` clients and passes every frame, unchanged, both ways, to a connection of its own to the SDK
server. The SDK stays the one server; the relay only renames the handshake.

Why by hand: the ``foxglove-websocket`` PyPI package (ws-protocol's Python server) is deprecated and unmaintained
since July 2025 (its repository's README), and a relay is the smaller thing to keep. The ``websockets`` package does
the WebSocket work. It runs on its own thread and event loop, and only while a legacy client is connected does it do
anything; the control loop never waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from typing import Any

from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

log = logging.getLogger(__name__)

LEGACY_SUBPROTOCOL = "foxglove.websocket.v1"
SDK_SUBPROTOCOL = "foxglove.sdk.v1"


class LegacySubprotocolRelay:
    """Serves ``foxglove.websocket.v1`` (and ``foxglove.sdk.v1``) on ``host:port`` (0: a free port, see ``port``),
    relaying every client to ``upstream_url`` (the SDK server) over ``foxglove.sdk.v1``. Use as a context manager or
    call ``close()``."""

    def __init__(self, upstream_url: str, host: str = "127.0.0.1", port: int = 0) -> None:
        self.upstream_url = upstream_url
        self.host = host
        self.clients = 0
        self._loop = asyncio.new_event_loop()
        self._stopped: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.port = 0
        self._thread = threading.Thread(target=self._run, args=(port,), name="foxglove-legacy-relay", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}"

    def _run(self, port: int) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._serve(port))
        finally:
            self._loop.close()

    async def _serve(self, port: int) -> None:
        self._stopped = asyncio.Event()
        try:
            server = await serve(  # the new name too: one port serves every app
                self._relay, self.host, port, subprotocols=[LEGACY_SUBPROTOCOL, SDK_SUBPROTOCOL],  # type: ignore[list-item]
                compression=None, max_size=None,
            )  # fmt: skip
        except OSError as exc:
            self._error = exc
            self._ready.set()
            return
        self.port = int(server.sockets[0].getsockname()[1])
        self._ready.set()
        async with server:
            await self._stopped.wait()

    async def _relay(self, client: ServerConnection) -> None:
        if client.subprotocol not in (LEGACY_SUBPROTOCOL, SDK_SUBPROTOCOL):
            await client.close(1002, f"offer the {LEGACY_SUBPROTOCOL} or {SDK_SUBPROTOCOL} subprotocol")
            return
        self.clients += 1
        try:
            sdk = [SDK_SUBPROTOCOL]
            async with connect(self.upstream_url, subprotocols=sdk, compression=None, max_size=None) as upstream:  # type: ignore[arg-type]
                to_server = asyncio.ensure_future(_pump(client, upstream))
                to_client = asyncio.ensure_future(_pump(upstream, client))
                await asyncio.wait({to_server, to_client}, return_when=asyncio.FIRST_COMPLETED)
                for task in (to_server, to_client):
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, ConnectionClosed):
                        await task
        except (OSError, ConnectionClosed) as exc:
            log.warning("Foxglove legacy relay: the SDK server at %s is gone: %s", self.upstream_url, exc)
        finally:
            self.clients -= 1

    def close(self) -> None:
        """Stop serving and drop the relayed connections. Safe to call twice."""
        if self._thread.is_alive() and self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
        self._thread.join(timeout=5.0)

    def __enter__(self) -> LegacySubprotocolRelay:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


async def _pump(source: Any, sink: Any) -> None:
    """Every frame from ``source`` to ``sink`` as it came (text stays text, binary stays binary)."""
    async for frame in source:
        await sink.send(frame)
