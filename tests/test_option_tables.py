"""The tables the command line derives from (issue 26): each derived list (``-o`` help, choices,
validation, completion, the man page) is a function of its table, so a row added to a throwaway
copy of the table shows up in every one of them, with nothing else edited."""

from __future__ import annotations

import argparse
import io

import pytest

from _support import EXAMPLES
from kubectl_kvdtype._kits.env import Environment
from kubectl_kvdtype._kits.status import UsageError

pytestmark = pytest.mark.version_sensitive  # argparse, completion and the man page (test_tiers.py)


def _formats_with_csv():
    from kubectl_kvdtype._output.render import FORMATS, Format

    csv = Format("csv", "comma-separated values", lambda report, _how: "csv\n", lambda fleet, _how: "csv\n")
    return (*FORMATS, csv)


def _completed(*words: str, **tables) -> list[str]:
    from kubectl_kvdtype._cli.complete import complete

    out = io.StringIO()
    complete(list(words), Environment(stdout=out, stderr=io.StringIO(), environ={}), **tables)
    return [line.split("\t")[0] for line in out.getvalue().splitlines()[:-1]]


def _output_action(parser: argparse.ArgumentParser) -> argparse.Action:
    return parser._option_string_actions["--output"]


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[name]


def test_a_format_row_is_offered_by_help_validation_completion_and_the_man_page():
    from kubectl_kvdtype._cli.main import parse
    from kubectl_kvdtype._cli.registry import build_parser

    formats = _formats_with_csv()
    parser = build_parser(formats=formats)
    for each in (parser, _subparser(parser, "check"), _subparser(_subparser(parser, "escape"), "status")):
        assert "csv" in _output_action(each).choices
        assert "csv (comma-separated values)" in " ".join(each.format_help().split())
    assert parse(["check", "-f", str(EXAMPLES), "-o", "csv"], formats=formats).output == "csv"
    with pytest.raises(UsageError, match="invalid choice: 'csv'"):
        parse(["check", "-f", str(EXAMPLES), "-o", "csv"])  # the real table has no such row
    assert "csv" in _completed("check", "-o", "", formats=formats)
    assert "csv" not in _completed("check", "-o", "")
    manpage = pytest.importorskip("argparse_manpage.manpage", reason="the `build` extra is not installed")
    assert "csv (comma\\-separated values)" in " ".join(str(manpage.Manpage(parser)).split())


def test_a_format_of_one_subcommand_and_flag_is_offered_and_taken_there_only():
    from kubectl_kvdtype._cli.main import parse
    from kubectl_kvdtype._output.render import FORMATS, Format

    only = Format("dot", "a graph", lambda report, _how: "", takes="find-flags", needs=("fix", "--fix"),
                  why="draws the fix")
    formats = (*FORMATS, only)
    assert parse(["find-flags", "--fix", "-f", str(EXAMPLES), "-o", "dot"], formats=formats).output == "dot"
    for argv in (["find-flags", "-o", "dot"], ["check", "-o", "dot"]):
        with pytest.raises(UsageError, match="-o dot draws the fix: use it with find-flags --fix"):
            parse([*argv, "-f", str(EXAMPLES)], formats=formats)
    assert "dot" in _completed("find-flags", "--fix", "-o", "", formats=formats)
    assert "dot" not in _completed("find-flags", "-o", "", formats=formats)
    assert "dot" not in _completed("check", "-o", "", formats=formats)


def test_completion_offers_the_formats_each_subcommand_takes():
    from kubectl_kvdtype._cli.registry import COMMANDS, judging
    from kubectl_kvdtype._output.render import EVERY, FORMATS, JUDGING

    every = [f.name for f in FORMATS if f.takes == EVERY]
    judged = [f.name for f in FORMATS if f.takes == JUDGING]
    for info in COMMANDS:
        words = ["escape", "status"] if info.name == "escape" else [info.name]
        expected = every + (judged if info.name in judging() else [])
        assert _completed(*words, "-o", "") == expected, info.name
    assert _completed("find-flags", "--fix", "-o", "") == [f.name for f in FORMATS]  # patch with --fix only
    assert "patch" not in _completed("find-flags", "-o", "")
