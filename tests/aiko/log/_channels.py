"""Channels the log tests record on: declared like every channel of the stack (the recorder takes no other)."""

from aiko.core.messages import Channel, Message, boolean, integer, number, numbers, string

COUNTER = Channel("/test/counter", Message("test.Counter", "a counter, one message per step", {
    "k": integer("the step"),
}))  # fmt: skip
OTHER_COUNTER = Channel("/test/other", Message("test.OtherCounter", "a second counter", {
    "k": integer("the step"),
}))  # fmt: skip
MIXED = Channel("/test/mixed", Message("test.Mixed", "fields that come and go", {
    "a": number("a number"),
    "v": numbers("a list whose length changes"),
    "b": string("a late string", optional=True),
}))  # fmt: skip
SERIES = Channel("/test/series", Message("test.Series", "a counter with joint-like arrays", {
    "k": integer("the step"),
    "angle_h_rad": numbers("angles", "rad"),
}))  # fmt: skip
SLOW_SERIES = Channel("/test/slow_series", Message("test.SlowSeries", "a slower counter with arrays", {
    "k": integer("the step"),
    "angle_h_rad": numbers("angles", "rad"),
}))  # fmt: skip

# the SIGKILL child's channels: Aiko's rates and payload sizes, a sequence number in each message
KILL_TEST_CHANNELS = {
    "/test/mocap": Channel("/test/mocap", Message("test.KillMocap", "a mocap-like sample", {
        "seq": integer("the sample"),
        "position_m": numbers("a position", "m"),
        "occluded": boolean("occluded"),
    })),
    "/test/references": Channel("/test/references", Message("test.KillReferences", "reference-like", {
        "seq": integer("the sample"),
        "angle_h_rad": numbers("angles", "rad"),
        "angle_v_rad": numbers("angles", "rad"),
    })),
    "/test/joint_feedback": Channel("/test/joint_feedback", Message("test.KillFeedback", "feedback-like", {
        "seq": integer("the sample"),
        "angle_h_rad": numbers("angles", "rad"),
        "angle_v_rad": numbers("angles", "rad"),
    })),
}  # fmt: skip
