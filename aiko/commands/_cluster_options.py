"""The Dask cluster options that ``aiko sweep``, ``aiko optimize`` and ``aiko identify`` share: one wording, one
range check (a module without ``register``: the CLI lists no command for it)."""

from __future__ import annotations

import argparse

from aiko.core.errors import AikoError


def add_cluster_arguments(p: argparse.ArgumentParser, what: str = "run") -> None:
    """``--scheduler`` and ``--workers``; ``what`` names the work in the scheduler's help ("run", "run the replays")."""
    p.add_argument("--scheduler", metavar="tcp://HOST:8786", help=f"{what} on this Dask cluster (default: a local one)")
    p.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="worker processes of the local cluster (default: one per core); with --scheduler, wait for N workers",
    )


def check_cluster_arguments(args: argparse.Namespace) -> None:
    """One-line errors for out-of-range ``--workers`` and (where the command has it) ``--run-timeout``."""
    if args.workers is not None and not 1 <= args.workers <= 4096:
        raise AikoError(f"--workers must be in [1, 4096], got {args.workers}")
    run_timeout = getattr(args, "run_timeout", None)
    if run_timeout is not None and not run_timeout > 0:
        raise AikoError(f"--run-timeout must be positive, got {run_timeout}")
