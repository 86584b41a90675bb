"""Progress of a long step (a run, a replay, a rod simulation) on stderr: a tqdm bar on a terminal, and a plain
line every ``interval_s`` seconds of wall time otherwise (CI logs, ``make run`` piped to a file).

A step shorter than ``interval_s`` prints nothing when not on a terminal, so quick commands and their tests keep a
quiet stderr. Used as the ``progress(done, total)`` callback of every run (``aiko.core.run.RunPlan.progress``), and
by ``aiko sweep`` with whole counts (``integer``), a rate and an ETA (``eta``) and a note of what failed.
"""

from __future__ import annotations

import math
import sys
import time
from typing import IO, Any

DEFAULT_INTERVAL_S = 10.0


class Progress:
    def __init__(
        self,
        label: str,
        unit: str = "s",
        *,
        stream: IO[str] | None = None,
        tty: bool | None = None,
        interval_s: float = DEFAULT_INTERVAL_S,
        integer: bool = False,
        eta: bool = False,
    ) -> None:
        self.label = label
        self.unit = unit
        self.integer = integer  # whole counts (runs), not a float quantity (seconds of run time)
        self.eta = eta  # lines say the rate and the time left (the bar always does)
        self._note = ""
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(tty if tty is not None else getattr(self.stream, "isatty", lambda: False)())
        self.interval_s = interval_s
        self._start = time.monotonic()
        self._last_line = self._start
        self._bar: Any = None
        self._lines = 0
        self._done = 0.0
        self._total = 0.0

    def __call__(self, done: float, total: float, note: str = "") -> None:
        """``note``: what else to say beside the count (``1 failed, 2 lost``)."""
        self._done, self._total, self._note = float(done), float(total), note
        if self.tty:
            self._update_bar()
            return
        now = time.monotonic()
        if now - self._last_line >= self.interval_s:
            self.line()

    def line(self) -> None:
        """Write the state now, whatever the interval (off a terminal; on one, the bar shows it)."""
        if self.tty:
            return
        now = time.monotonic()
        self._last_line = now
        self._lines += 1
        self.stream.write(f"{self._text()} ({now - self._start:.0f} s)\n")
        self.stream.flush()

    def _count(self, value: float) -> str:
        return f"{value:.0f}" if self.integer else f"{value:.1f}"

    def _text(self) -> str:
        share = 100.0 * self._done / self._total if self._total > 0 else 0.0
        text = f"{self.label}: {self._count(self._done)} / {self._count(self._total)} {self.unit} ({share:.0f} %)"
        if self._note:
            text += f", {self._note}"
        if self.eta:
            elapsed = time.monotonic() - self._start
            rate = self._done / elapsed if elapsed > 0 else 0.0
            left = (self._total - self._done) / rate if rate > 0 else math.nan
            text += f", {rate:.2f} {self.unit}/s, ETA {_duration(left) if math.isfinite(left) else '?'}"
        return text

    def _update_bar(self) -> None:
        if self._bar is None:
            try:
                from tqdm import tqdm
            except ImportError:  # a plain line rewritten in place
                self.stream.write(f"\r  {self._text()}")
                self.stream.flush()
                return
            digits = 0 if self.integer else 1
            counts = f"{{n:.{digits}f}}/{{total:.{digits}f}} " + self.unit
            self._bar = tqdm(
                total=round(self._total, 3), desc=self.label, unit=self.unit, file=self.stream, leave=True,
                bar_format="{desc}: {percentage:3.0f}%|{bar}| " + counts + " [{elapsed}<{remaining}]",
            )  # fmt: skip
        self._bar.n = round(min(self._done, self._total), 3)
        if self._note:
            self._bar.set_postfix_str(self._note, refresh=False)
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


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m{s % 60:02d}s" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"
