"""Reader for the RDT protocol over UDP (ATI Net F/T, OptoForce EtherDAQ, OnRobot HEX Compute Box).

The socket is connected to the sensor's address, so the kernel drops datagrams from anyone else; its receive
buffer is enlarged so that a consumer hiccup of a few hundred ms at 1 kHz costs nothing. ``flavour`` picks the
bias command's meaning: ``"ati"`` (0x0042 = take a software bias in the Net F/T) or ``"onrobot"`` (0x0042 with data
0xFF / 0x00 = bias on / off in the EtherDAQ / HEX), and whether speed / filter commands are sent at start.
"""

from __future__ import annotations

import socket
import time

from aiko.core.errors import ConfigError
from aiko.devices.force_sensor import rdt
from aiko.devices.force_sensor.errors import FrameError
from aiko.devices.force_sensor.reader import ForceSensorReader
from aiko.devices.force_sensor.wrench import ATI_NETFT_DEFAULT, ONROBOT_HEX_DEFAULT, CountsScale

FLAVOURS = ("onrobot", "ati")
_RCVBUF_BYTES = 4 * 1024 * 1024
_POLL_S = 0.1


def parse_address(text: str, default_port: int = rdt.RDT_PORT) -> tuple[str, int]:
    """``HOST[:PORT]`` -> (host, port); ConfigError in one line when malformed."""
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = text, str(default_port)
    try:
        port = int(port_text)
    except ValueError:
        raise ConfigError(f"bad address {text!r}: expected HOST:PORT") from None
    if not host or not 0 < port < 65536:
        raise ConfigError(f"bad address {text!r}: expected HOST:PORT with a port in 1..65535")
    return host, port


class UdpReader(ForceSensorReader):
    def __init__(
        self,
        address: str | tuple[str, int],
        *,
        flavour: str = "onrobot",
        scale: CountsScale | None = None,
        rate_hz: float | None = 1000.0,
        filter_code: int | None = 0,
        local_address: str = "",
        buffered: bool = False,
        **kwargs,
    ) -> None:
        if flavour not in FLAVOURS:
            raise ConfigError(f"unknown F/T flavour {flavour!r}: choose one of {', '.join(FLAVOURS)}")
        if scale is None:
            scale = ONROBOT_HEX_DEFAULT if flavour == "onrobot" else ATI_NETFT_DEFAULT
        super().__init__(scale, **kwargs)
        self.address = parse_address(address) if isinstance(address, str) else address
        self.flavour = flavour
        self.rate_hz = rate_hz
        self.filter_code = filter_code
        self.local_address = local_address
        self.buffered = buffered
        if filter_code is not None and filter_code not in rdt.FILTER_CODES_HZ:
            raise ConfigError(f"filter code {filter_code} is not 0..6")
        self._sock: socket.socket | None = None
        self.rcvbuf_bytes = 0  # what the kernel granted (capped by net.core.rmem_max on Linux)

    def describe(self) -> str:
        return f"udp {self.address[0]}:{self.address[1]}"

    def _open(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _RCVBUF_BYTES)
            sock.bind((self.local_address, 0))
            sock.connect(self.address)
            self.rcvbuf_bytes = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        except OSError as exc:
            sock.close()
            raise ConfigError(f"cannot open UDP to {self.address[0]}:{self.address[1]}: {exc.strerror}") from None
        sock.settimeout(_POLL_S)
        self._sock = sock

    def send(self, command: rdt.RdtCommand, data: int = 0) -> None:
        assert self._sock is not None, "reader not started"
        try:
            self._sock.send(rdt.encode_request(rdt.RdtRequest(command, data)))
        except ConnectionRefusedError:
            pass  # an ICMP port-unreachable from an earlier datagram; the timeout reports a silent sensor

    def _start_device(self) -> None:
        if self.flavour == "onrobot":
            if self.rate_hz is not None:
                self.send(rdt.RdtCommand.SET_SPEED, rdt.speed_data_for_rate(self.rate_hz))
            if self.filter_code is not None:
                self.send(rdt.RdtCommand.SET_FILTER, self.filter_code)
        command = rdt.RdtCommand.START_BUFFERED if self.buffered else rdt.RdtCommand.START_REALTIME
        # UDP may lose the request: repeat it (as the ROS drivers do) until data flows or the timeout is spent
        deadline = self._deadline
        while True:
            self.send(command, 0)
            if self.wait_for_samples(1, min(0.1, max(0.0, deadline - time.monotonic()))):
                return
            if time.monotonic() >= deadline:
                return

    def _stop_device(self) -> None:
        if self._sock is not None:
            self.send(rdt.RdtCommand.STOP_STREAMING, 0)

    def device_bias(self, on: bool = True) -> None:
        """ATI: 0x0042 takes a software bias in the box (``on`` must be True). OnRobot: 0x0042 0xFF / 0x00."""
        if self.flavour == "ati":
            if not on:
                raise ConfigError("the Net F/T has no 'bias off' RDT command; clear it on its web page")
            self.send(rdt.RdtCommand.SET_BIAS, 0)
        else:
            self.send(rdt.RdtCommand.SET_BIAS, rdt.BIAS_ON if on else rdt.BIAS_OFF)

    def _receive_loop(self) -> None:
        sock = self._sock
        assert sock is not None
        while not self._stop.is_set():
            try:
                datagram = sock.recv(rdt.RECORD_SIZE * rdt.MAX_RECORDS_PER_DATAGRAM + 1)
            except TimeoutError:
                continue
            except ConnectionRefusedError:  # ICMP from a sensor not (yet) listening
                continue
            except OSError:
                if self._stop.is_set():
                    return
                raise
            t_ns = time.monotonic_ns()
            try:
                records = rdt.decode_records(datagram)
            except FrameError:
                self.stats.malformed += 1
                continue
            for record in records:
                if self._accept_sequence(self._unwrap(record.rdt_sequence)):
                    self._deliver(record.counts, self._last_sequence, record.status, t_ns)  # type: ignore[arg-type]

    def _unwrap(self, sequence32: int) -> int:
        """uint32 RDT sequence -> monotonic integer (wraps after 2^32 samples, 50 days at 1 kHz)."""
        last = self._last_sequence
        if last is None:
            return sequence32
        delta = (sequence32 - last) & 0xFFFFFFFF
        if delta >= 0x80000000:  # behind the last one: a reordered or duplicated record
            delta -= 1 << 32
        return last + delta

    def _close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
