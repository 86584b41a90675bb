"""An iterator's items produced ahead, in a background thread, while the consumer works on the ones before.

Why: a two-stage job whose stages hold the interpreter lock only briefly (the HIL camera: rendering a frame is
OpenCV and numpy on whole images; tracking it and the compiled strain observer come after) runs on two cores
instead of one when the first stage runs ahead in its own thread. The items arrive in the iterator's own order,
produced by one thread in that order, so anything the producer draws in sequence (a camera's noise) is the same as
without read-ahead: the consumer sees exactly the items it would have seen.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterable, Iterator
from typing import TypeVar, cast

T = TypeVar("T")
log = logging.getLogger(__name__)

_END = object()


def _close_early(iterator: Iterator[object]) -> None:
    """A generator the consumer stopped early runs its cleanup now, in the thread that ran it (an exhausted one, or
    an iterator that is not a generator, is left as it is: a file object's owner closes it)."""
    close = getattr(iterator, "close", None)
    if close is None:
        return
    try:
        close()
    except Exception:  # noqa: BLE001  (nobody is left to raise it to: the consumer has stopped)
        log.warning("read_ahead: the stopped iterator's cleanup failed", exc_info=True)


class _Failed:
    """The producer's exception, handed to the consumer at the place in the sequence where it was raised."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


def read_ahead(items: Iterable[T], depth: int = 4, *, name: str = "read-ahead") -> Iterator[T]:
    """``items`` produced up to ``depth`` ahead of the consumer, in order; the producer's exception is raised in the
    consumer after the items produced before it. A consumer that stops early (``close``, ``break``, garbage
    collection) stops the producer at its next item."""
    if depth < 1:
        raise ValueError(f"read_ahead: depth must be >= 1, got {depth}")
    ready: queue.Queue[object] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    iterator = iter(items)

    def produce() -> None:
        outcome: object = _END
        try:
            for item in iterator:
                if not put(item):
                    _close_early(iterator)
                    return
        except BaseException as error:  # noqa: BLE001  (handed to the consumer, which raises it)
            outcome = _Failed(error)
        put(outcome)

    producer = threading.Thread(target=produce, name=name, daemon=True)

    def consume() -> Iterator[T]:
        producer.start()
        try:
            while True:
                item = ready.get()
                if item is _END:
                    return
                if isinstance(item, _Failed):
                    raise item.error
                yield cast(T, item)
        finally:
            stop.set()
            producer.join()

    return consume()
