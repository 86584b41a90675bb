"""Six-axis force/torque sensors: OnRobot HEX / OptoForce EtherDAQ / ATI Net F/T over UDP (RDT), and the OptoForce
USB DAQ over serial. Protocol codecs, readers (a background thread into a bounded buffer, with exact loss and
corruption counters and bias) and protocol emulators. See docs/force_sensor.md."""

from aiko.devices.force_sensor.errors import ChecksumError, FrameError, SensorTimeout
from aiko.devices.force_sensor.reader import ForceSensorReader, StreamStats
from aiko.devices.force_sensor.serial_reader import SerialReader
from aiko.devices.force_sensor.udp_reader import UdpReader
from aiko.devices.force_sensor.wrench import ATI_NETFT_DEFAULT, ONROBOT_HEX_DEFAULT, CountsScale, Wrench

__all__ = [
    "ATI_NETFT_DEFAULT",
    "ONROBOT_HEX_DEFAULT",
    "ChecksumError",
    "CountsScale",
    "ForceSensorReader",
    "FrameError",
    "SensorTimeout",
    "SerialReader",
    "StreamStats",
    "UdpReader",
    "Wrench",
]
