"""`aiko … --help` in one style: every command described, every flag explained, one placeholder per thing."""

import argparse
import collections

from aiko.cli import build_parser, main


def _walk(parser, path=()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk(sub, (*path, name))
        else:
            yield path, parser, action


def test_every_command_has_a_description_and_every_argument_a_help_text():
    parser = build_parser(None)
    commands = {path for path, _, _ in _walk(parser)}
    for path, sub, action in _walk(parser):
        assert sub.description, f"aiko {' '.join(path)} has no description"
        assert action.help, f"aiko {' '.join(path)} {action.option_strings or action.dest} has no help text"
    assert ("run",) in commands and ("can", "decode") in commands


def test_the_same_thing_has_the_same_placeholder_everywhere():
    placeholders = collections.defaultdict(set)
    for _path, _, action in _walk(build_parser(None)):
        if action.nargs != 0 and action.choices is None and action.dest not in ("out", "csv", "help", "version"):
            placeholders[action.dest].add(action.metavar)
    mixed = {dest: names for dest, names in placeholders.items() if len(names) > 1}
    assert not mixed
    assert placeholders["log"] == {"LOG"} and placeholders["experiment"] == {"EXPERIMENT"}


def test_json_help_and_can_log_formats(capsys):
    assert main(["report", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--json" in out and "print the result as JSON on stdout" in out
    assert main(["run", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    for suffix in (".asc", ".blf", ".log", ".csv", ".trc"):
        assert suffix in out
