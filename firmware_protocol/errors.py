"""Exceptions of the wire protocol: every rejection names the frame, the signal and what is allowed."""


class ProtocolError(ValueError):
    """A frame or a value that the Aiko joint protocol does not allow."""


class UnknownFrameError(ProtocolError):
    """The frame id is not defined in `aiko_joint.dbc`."""


class FrameLengthError(ProtocolError):
    """The data length code differs from the DBC's length for that message."""


class SignalRangeError(ProtocolError):
    """A physical value lies outside the [minimum, maximum] the DBC declares for its signal."""
