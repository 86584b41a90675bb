"""Progress of long steps: a tqdm bar on a terminal, a plain line now and then elsewhere, nothing for short steps."""

import io

from aiko.core.progress import Progress


def test_off_a_terminal_a_plain_line_every_interval_and_a_closing_line():
    out = io.StringIO()
    with Progress("run sidewinding", stream=out, tty=False, interval_s=0.0) as progress:
        for t in (1.0, 7.5, 15.0):
            progress(t, 15.0)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("run sidewinding: 1.0 / 15.0 s (7 %)")
    assert lines[1].startswith("run sidewinding: 7.5 / 15.0 s (50 %)")
    assert lines[-1].startswith("run sidewinding: done in")


def test_a_short_step_off_a_terminal_prints_nothing():
    out = io.StringIO()
    with Progress("replay", stream=out, tty=False) as progress:
        progress(15.0, 15.0)
    assert out.getvalue() == ""


def test_on_a_terminal_a_progress_bar():
    out = io.StringIO()
    with Progress("rod rod_on_plane", stream=out, tty=True) as progress:
        progress(0.5, 2.0)
        progress(2.0, 2.0)
    text = out.getvalue()
    assert "rod rod_on_plane" in text and "100%" in text and "2.0/2.0 s" in text
