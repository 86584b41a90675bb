"""Progress of a long step (a run, a replay, a rod simulation) on stderr: a tqdm bar on a terminal, and a plain
line every ``interval_s`` seconds of wall time otherwise (CI logs, ``make run`` piped to a file).

A step shorter than ``interval_s`` prints nothing when not on a terminal, so quick commands and their tests keep a
quiet stderr. Used as the ``progress(done, total)`` callback of ``ControlLoop`` and ``record_run``.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

DEFAULT_INTERVAL_S = 10.0


class Progress:
    def __init__(
        self,
        label: str,
        unit: str = "s",
        *,
        stream: TextIO | None = None,
        tty: bool | None = None,
        interval_s: float = DEFAULT_INTERVAL_S,
    ) -> None:
        self.label = label
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(tty if tty is not None else getattr(self.stream, "isatty", lambda: False)())
        self.interval_s = interval_s
        self._start = time.monotonic()
        self._last_line = self._start
        self._bar: Any = None
        self._lines = 0
        self._done = 0.0
        self._total = 0.0

    def __call__(self, done: float, total: float) -> None:
        self._done, self._total = float(done), float(total)
        if self.tty:
            self._update_bar()
            return
        now = time.monotonic()
        if now - self._last_line >= self.interval_s:
            self._last_line = now
            self._lines += 1
            self.stream.write(f"{self._text()} ({now - self._start:.0f} s)\n")
            self.stream.flush()

    def _text(self) -> str:
        share = 100.0 * self._done / self._total if self._total > 0 else 0.0
        return f"{self.label}: {self._done:.1f} / {self._total:.1f} {self.unit} ({share:.0f} %)"

    def _update_bar(self) -> None:
        if self._bar is None:
            try:
                from tqdm import tqdm
            except ImportError:  # a plain line rewritten in place
                self.stream.write(f"\r  {self._text()}")
                self.stream.flush()
                return
            counts = "{n:.1f}/{total:.1f} " + self.unit
            self._bar = tqdm(
                total=round(self._total, 3), desc=self.label, unit=self.unit, file=self.stream, leave=True,
                bar_format="{desc}: {percentage:3.0f}%|{bar}| " + counts + " [{elapsed}<{remaining}]",
            )  # fmt: skip
        self._bar.n = round(min(self._done, self._total), 3)
        self._bar.refresh()

    def complete(self) -> None:
        """The step finished: the bar shows 100 % (the last callback may come a step before the end)."""
        if self._total > 0:
            self(self._total, self._total)

    def close(self) -> None:
        """End the bar (or, off a terminal, say the step finished if a line about it was printed)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self.tty and self._total > 0:
            self.stream.write("\n")
        elif self._lines:
            self.stream.write(f"{self.label}: done in {time.monotonic() - self._start:.0f} s\n")
        self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
