"""stderr by a thread of its own: a writer never waits for the output, nothing is lost or reordered, and the stream
is what it was once the block ends."""

import io
import logging
import sys
import threading

from aiko.core.background_stream import BackgroundStream, stderr_in_background


class BlockedTarget(io.StringIO):
    """A stderr whose writes wait until released: a throttled disk, a terminal or pipe nobody reads."""

    def __init__(self) -> None:
        super().__init__()
        self.released = threading.Event()

    def write(self, text: str) -> int:
        self.released.wait()
        return super().write(text)


def _finishes(target, *args) -> bool:
    """Whether ``target(*args)`` returns (within a minute: a write that waits for the output never does here)."""
    worker = threading.Thread(target=target, args=args, daemon=True)
    worker.start()
    worker.join(60.0)
    return not worker.is_alive()


def test_a_logging_thread_goes_on_while_its_stderr_is_blocked_and_nothing_is_lost():
    target = BlockedTarget()
    stream = BackgroundStream(target)
    logger = logging.getLogger("test_background_stream.loop")
    logger.propagate = False
    handler = logging.StreamHandler(stream)  # as logging.basicConfig makes it inside `aiko` (cli.main)
    logger.addHandler(handler)
    try:

        def control_loop() -> None:
            for k in range(200):
                logger.warning("deadline %d missed", k)

        assert _finishes(control_loop)  # with a plain StreamHandler(target) this waits for `released` forever
        assert target.getvalue() == ""
        target.released.set()
        assert stream.drain()
        assert target.getvalue() == "".join(f"deadline {k} missed\n" for k in range(200))
    finally:
        logger.removeHandler(handler)
        target.released.set()
        stream.close()


def test_writes_of_several_threads_arrive_whole_and_in_each_threads_order():
    target = io.StringIO()
    stream = BackgroundStream(target)

    def writer(name: str) -> None:
        for k in range(500):
            stream.write(f"{name} {k}\n")

    threads = [threading.Thread(target=writer, args=(name,)) for name in "abc"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stream.close()
    lines = target.getvalue().splitlines()
    assert len(lines) == 1500
    for name in "abc":
        assert [line for line in lines if line.startswith(name)] == [f"{name} {k}" for k in range(500)]


def test_after_close_writes_go_straight_through():
    target = io.StringIO()
    stream = BackgroundStream(target)
    stream.write("queued\n")
    stream.close()
    assert target.getvalue() == "queued\n"
    stream.write("at exit\n")  # logging.shutdown or a traceback after `aiko` returned
    assert target.getvalue() == "queued\nat exit\n"


def test_stderr_is_the_background_stream_inside_the_block_and_itself_after_it(capsys):
    before = sys.stderr
    with stderr_in_background() as stream:
        assert sys.stderr is stream
        print("from the command", file=sys.stderr)
    assert sys.stderr is before
    assert capsys.readouterr().err == "from the command\n"


def test_a_broken_stderr_is_counted_not_raised_into_the_writer():
    class Broken(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError("reader gone")

    stream = BackgroundStream(Broken())
    stream.write("lost\n")
    assert stream.drain()
    assert stream.write_errors == 1
    stream.close()
