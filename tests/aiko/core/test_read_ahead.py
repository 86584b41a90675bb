"""read_ahead: an iterator's items produced in a background thread, in order, its exception in the consumer."""

import threading

import pytest

from aiko.core.read_ahead import read_ahead


def test_the_items_arrive_in_order_from_one_producer_thread():
    producers = set()

    def items():
        for i in range(100):
            producers.add(threading.current_thread().name)
            yield i

    assert list(read_ahead(items(), depth=3, name="test-producer")) == list(range(100))
    assert producers == {"test-producer"}


def test_the_producers_exception_comes_after_the_items_before_it():
    def items():
        yield 1
        yield 2
        raise KeyError("frame 3 is damaged")

    got = []
    with pytest.raises(KeyError, match="frame 3 is damaged"):
        for item in read_ahead(items()):
            got.append(item)
    assert got == [1, 2]


def test_a_consumer_that_stops_early_stops_the_producer():
    """The producer is never more than ``depth`` items ahead, and ends once the consumer closes the iterator."""
    produced = []
    finished = threading.Event()

    def items():
        try:
            for i in range(10_000):
                produced.append(i)
                yield i
        finally:
            finished.set()

    ahead = read_ahead(items(), depth=2)
    assert next(ahead) == 0
    assert next(ahead) == 1
    ahead.close()  # joins the producer
    assert finished.is_set()
    assert len(produced) <= 2 + 2 + 1  # the two consumed, two queued, one waiting for room


def test_an_empty_iterator_and_a_bad_depth():
    assert list(read_ahead(iter(()))) == []
    with pytest.raises(ValueError, match="depth must be >= 1"):
        read_ahead([1], depth=0)


def test_an_exhausted_iterator_is_not_closed_and_a_failing_cleanup_does_not_hang_the_consumer():
    class File:
        def __init__(self):
            self.lines, self.closed = iter(["a", "b"]), False

        def __iter__(self):
            return self

        def __next__(self):
            return next(self.lines)

        def close(self):
            self.closed = True

    source = File()
    assert list(read_ahead(source)) == ["a", "b"] and not source.closed  # its owner closes it

    def stubborn():
        for i in range(1000):
            try:
                yield i
            except GeneratorExit:
                raise RuntimeError("cleanup failed") from None

    ahead = read_ahead(stubborn(), depth=1)
    assert next(ahead) == 0
    ahead.close()  # returns: the cleanup's error is logged, not raised into nobody
