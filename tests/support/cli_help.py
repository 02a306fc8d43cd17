"""Checks shared by the command lines (transformer_np, parity, benchmarks): every flag explains itself, and a bad
flag is refused in one line.

`undocumented_flags(parser)` walks a parser and its subcommands and returns one line per flag that has no help
text, or whose rendered help does not show its default (flags without a meaningful default are exempt:
switches such as `--resume` and flags whose default is None). `one_line_refusal(main, argv, capsys)` runs a
main that must refuse argv: exit 2 and one line on stderr. `lazy_import_interrupted()` gets a Ctrl-C as Python
raises one inside a class's __set_name__ (a lazy import's dataclass): a RuntimeError from the KeyboardInterrupt.
"""

from __future__ import annotations

import argparse

import pytest

_SWITCH_ACTIONS = (
    argparse._StoreTrueAction,
    argparse._StoreFalseAction,
    argparse._StoreConstAction,
    argparse._HelpAction,
    argparse._VersionAction,
    argparse._CountAction,
)


def _subparsers(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def undocumented_flags(parser: argparse.ArgumentParser, prefix: str = "") -> list[str]:
    """Flags of `parser` (and of every subcommand, recursively) lacking a help line or a shown default."""
    problems = []
    rendered = " ".join(parser.format_help().split())  # help text with line wrapping undone
    name = prefix or parser.prog
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        flag = action.option_strings[-1] if action.option_strings else action.dest
        if not action.help or action.help == argparse.SUPPRESS:
            problems.append(f"{name} {flag}: no help text")
            continue
        if isinstance(action, _SWITCH_ACTIONS) or action.default in (None, argparse.SUPPRESS):
            continue
        default = action.default
        shown = ", ".join(map(str, default)) if isinstance(default, (list, tuple)) else str(default)
        if f"default: {shown}" not in rendered and f"default {shown}" not in rendered:
            problems.append(f"{name} {flag}: default {shown!r} not shown in --help")
    for sub_name, sub in _subparsers(parser):
        problems += undocumented_flags(sub, f"{name} {sub_name}")
    return problems


def one_line_refusal(main, argv: list, capsys) -> str:
    """main(argv) refused: exit 2 and one line on stderr, returned (for the caller to look for its message)."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and len(err.splitlines()) == 1, err
    return err


class _InterruptedWhileNamed:
    """A class attribute whose __set_name__ gets the Ctrl-C, as a dataclass Field of a module torch imports lazily
    did in CI: Python 3.11 raises it as RuntimeError from the KeyboardInterrupt."""

    def __set_name__(self, owner, name):
        raise KeyboardInterrupt


def lazy_import_interrupted(*args):
    class Imported:  # its body runs __set_name__
        field = _InterruptedWhileNamed()
