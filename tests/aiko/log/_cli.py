"""Run the `aiko` CLI in-process."""

from aiko.cli import main


def run_cli(argv: list[str]) -> int:
    return main(argv)
