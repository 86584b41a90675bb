"""The DataStream's multicast: a client asks the server to send the frames it receives to a UDP group as well.

What the SDK does (DataStream SDK 1.11.0 sources in the ``pyvicon-datastream`` 0.2.4 sdist, ``Vicon/CrossMarket/
DataStream/``):

- ``StartTransmittingMulticast(ServerIP, MulticastIP[:port])`` (``ViconDataStreamSDKCore/CoreClient.cpp``) checks
  the address, then writes one StartMulticastSender object {group, ServerIP as the source interface, port (default
  44801)} on the TCP connection and returns Success: the server sends no answer, so **what the server does with it
  is invisible to the calling client** — only the receivers can tell.
- ``StopTransmittingMulticast`` writes StopMulticastSender (no payload); ``Disconnect`` writes nothing.
- A receiver (``ConnectToMulticast``; ``ViconCGStreamClient.cpp``, ``ReceiveMulticastData`` and ``ClientThread``)
  binds a UDP socket to (group, port), joins the group on its local interface and parses each datagram with the
  same ``ReadObjects`` as a TCP frame (``CGStreamReaderWriter.cpp``, ``Fill``: one datagram of up to 64 KiB is one
  packet). So a datagram is exactly the packet the controlling client gets over TCP.

What the emulated server does, from the SDK's description of the call ("start transmitting the data you are
receiving directly to a Multicast address as well", ``DataStreamClient.h``): while the connection that asked is
open and has not sent StopMulticastSender, every frame the server releases goes to the group, holding the object
types that connection asked for. It ends with the connection (a Tracker's behaviour when the controlling client
goes is not documented; the SDK's ``Disconnect`` does not stop it explicitly). A request the emulator cannot serve
(the source is not an address of this machine, the group is neither multicast nor broadcast) is logged as a
warning and counted: the SDK gives the calling client no way to hear a refusal.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from dataclasses import dataclass

from aiko.devices.vicon import protocol as p

log = logging.getLogger(__name__)

MAX_DATAGRAM_BYTES = 65_507  # the largest UDP payload over IPv4; the SDK's receive buffer is 64 KiB
BROADCAST = ipaddress.IPv4Address("255.255.255.255")


class MulticastRefused(Exception):
    """A StartMulticastSender the emulated server cannot serve (the message says why)."""


@dataclass(frozen=True)
class MulticastTarget:
    group: ipaddress.IPv4Address
    source: ipaddress.IPv4Address
    port: int

    @classmethod
    def from_request(cls, request: p.StartMulticastSender) -> MulticastTarget:
        return cls(ipaddress.IPv4Address(request.multicast_ip), ipaddress.IPv4Address(request.source_ip), request.port)

    def __str__(self) -> str:
        return f"{self.group}:{self.port} from {self.source}"


class MulticastSender:
    """A UDP socket sending packets to one group from one local interface; ``send`` never blocks."""

    def __init__(self, target: MulticastTarget) -> None:
        if not (target.group.is_multicast or target.group == BROADCAST):
            raise MulticastRefused(f"{target.group} is neither a multicast group nor the broadcast address")
        if target.port == 0:
            raise MulticastRefused("port 0")
        self.target = target
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.bind((str(target.source), 0))  # fails for an address this machine does not have
            if target.group.is_multicast:
                sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, target.source.packed)
                sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)  # receivers on this machine too
            else:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
        except OSError as exc:
            sock.close()
            raise MulticastRefused(f"cannot send from {target.source}: {exc.strerror or exc}") from None
        sock.setblocking(False)
        self._sock = sock
        self._destination = (str(target.group), target.port)
        self.sent = 0
        self.dropped = 0  # too large for a datagram, or the socket buffer was full

    def send(self, packet: bytes) -> bool:
        """Send one packet as one datagram; False if it was not sent (too large, buffer full, closed)."""
        if len(packet) > MAX_DATAGRAM_BYTES:
            self.dropped += 1
            if self.dropped == 1:
                log.warning("vicon: a %d-byte frame does not fit a UDP datagram: not multicast", len(packet))
            return False
        try:
            self._sock.sendto(packet, self._destination)
        except OSError:  # buffer full (BlockingIOError), closed meanwhile: that datagram is lost, as on a LAN
            self.dropped += 1
            return False
        self.sent += 1
        return True

    def close(self) -> None:
        self._sock.close()
