"""The checks ``--live`` / ``--live-screenshot`` need before a run starts (``aiko run``, ``aiko bench run``)."""

from __future__ import annotations

from pathlib import Path

from aiko.core.errors import AikoError, writing


def check_live_outputs(live: bool, screenshot: str | None) -> None:
    """One line before anything moves, not a window that cannot open afterwards: ``--live`` needs a display unless
    ``--live-screenshot`` renders offscreen, and the screenshot's path must be writable."""
    if live and not screenshot:
        from aiko.dashboard.window import interactive_display_available

        if not interactive_display_available():
            raise AikoError(
                "--live needs a display (no DISPLAY or WAYLAND_DISPLAY); --live-screenshot OUT.png renders offscreen"
            )
    if screenshot:
        shot = Path(screenshot)
        with writing(shot):
            shot.parent.mkdir(parents=True, exist_ok=True)
            shot.touch()
