"""``docs/reference/cli.md``, written from the ``mqstore`` argument parser
(``mqstore.scripts.cli.mqstore.build_parser``): every command and subcommand, its usage, and each
argument with its default, choices and help."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from mqstore.scripts.cli.mqstore import build_parser
from mqstore.scripts.docs.markdown import GENERATED_NOTE, cell, table

PAGE = "reference/cli.md"
COMMAND = "python -m mqstore.scripts.docs"
USAGE_WIDTH = 100  # the usage lines wrap here whatever the terminal's width


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """Each subcommand of ``parser``: its name, its one-line help and its parser."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            found += [(name, helps.get(name, ""), sub) for name, sub in action.choices.items()]
    return found


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(parser.prog, width=USAGE_WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def _default(action: argparse.Action) -> str:
    default: Any = action.default
    if not action.option_strings or default in (None, False, argparse.SUPPRESS) or isinstance(
            action, argparse._StoreTrueAction | argparse._VersionAction | argparse._HelpAction):
        return "—"
    if isinstance(default, Path) and not default.is_absolute():
        return f"`./{default}`"
    return f"`{default}`"


def _name(action: argparse.Action) -> str:
    if action.option_strings:
        value = f" {action.metavar or action.dest.upper()}" if action.nargs != 0 else ""
        return ", ".join(f"`{option}{value}`" for option in action.option_strings)
    return f"`{action.metavar or action.dest}`" + (" (optional)" if action.nargs == "?" else "")


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    text = action.help or ""
    if "%(" in text:
        text = text % {**vars(action), "prog": parser.prog}
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        text += f" (one of: {', '.join(str(choice) for choice in action.choices)})"
    if action.required and action.option_strings:
        text += " (required)"
    return cell(text)


def _arguments(parser: argparse.ArgumentParser) -> list[list[str]]:
    return [[_name(action), _default(action), _help(parser, action)] for action in parser._actions
            if action.help != argparse.SUPPRESS and not isinstance(action, argparse._HelpAction | argparse.
                                                                   _SubParsersAction)]


def _command(words: list[str], helptext: str, parser: argparse.ArgumentParser, level: int) -> list[str]:
    out = [f"{'#' * level} `{' '.join(words)}`", ""]
    if helptext:
        out += [helptext[0].upper() + helptext[1:] + ("" if helptext.endswith(".") else "."), ""]
    if parser.description and parser.description != helptext:
        out += [parser.description, ""]
    out += ["```text", _usage(parser), "```", ""]
    rows = _arguments(parser)
    if rows:
        out += [*table(["Argument", "Default", "Help"], rows), ""]
    for name, subhelp, sub in _subcommands(parser):
        out += _command([*words, name], subhelp, sub, min(level + 1, 4))
    return out


def render() -> str:
    parser = build_parser()
    out = ["# CLI reference", "", GENERATED_NOTE.format(command=COMMAND), "",
           "`mqstore` is installed with the package (`pip install -e .`); `python -m mqstore.scripts.cli.mqstore` "
           "runs the same command from a checkout. Every command that touches a store takes `--store` "
           "(default `./mqstore-data`); what each exit status means is in [Exit codes](exit-codes.md).", "",
           "```text", _usage(parser), "```", "", *table(["Argument", "Default", "Help"], _arguments(parser)), "",
           "Commands: " + ", ".join(f"[`{name}`](#mqstore-{name})" for name, _, _ in _subcommands(parser)) + ".", ""]
    for name, helptext, sub in _subcommands(parser):
        out += _command(["mqstore", name], helptext, sub, 2)
    return "\n".join(out)
