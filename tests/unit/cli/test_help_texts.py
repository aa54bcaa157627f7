"""Every option of every command says in ``--help`` what it does (issue #24 item 6: help texts
for users; a flag listed bare is a flag nobody knows when to use)."""

from __future__ import annotations

import argparse

from reconciler.cli.app import build_parser


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found[f"{parser.prog.split(' ', 1)[-1]} {name}".strip()] = child
                found.update(_subparsers(child))
    return found


def test_every_option_of_every_command_has_help() -> None:
    bare = [
        f"{command} {'/'.join(action.option_strings)}"
        for command, parser in _subparsers(build_parser()).items()
        for action in parser._actions
        if action.option_strings and action.help is None
    ]
    assert bare == []
