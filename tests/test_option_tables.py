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


def _formats_with_a_made_up_row():
    from kubectl_kvdtype._output.format import Format
    from kubectl_kvdtype._output.render import FORMATS

    made_up = Format("made-up", "a throwaway format", lambda report, _how: "made up\n",
                     lambda fleet, _how: "made up\n")
    return (*FORMATS, made_up)


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

    formats = _formats_with_a_made_up_row()
    parser = build_parser(formats=formats)
    assert "made-up (a throwaway format)" in " ".join(parser.format_help().split())  # where the global flags are
    for each in (parser, _subparser(parser, "check"), _subparser(_subparser(parser, "escape"), "status")):
        assert "made-up" in _output_action(each).choices
    assert parse(["check", "-f", str(EXAMPLES), "-o", "made-up"], formats=formats).output == "made-up"
    assert parse(["-o", "made-up", "escape", "status", "-f", str(EXAMPLES)], formats=formats).output == "made-up"
    with pytest.raises(UsageError, match="invalid choice: 'made-up'"):
        parse(["check", "-f", str(EXAMPLES), "-o", "made-up"])  # the real table has no such row
    assert "made-up" in _completed("check", "-o", "", formats=formats)
    assert "made-up" not in _completed("check", "-o", "")
    manpage = pytest.importorskip("argparse_manpage.manpage", reason="the `build` extra is not installed")
    assert "made\\-up (a throwaway format)" in " ".join(str(manpage.Manpage(parser)).split())


def test_a_format_of_one_subcommand_and_flag_is_offered_and_taken_there_only():
    from kubectl_kvdtype._cli.main import parse
    from kubectl_kvdtype._output.format import Format
    from kubectl_kvdtype._output.render import FORMATS

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
    from kubectl_kvdtype._output.format import EVERY, JUDGING
    from kubectl_kvdtype._output.render import FORMATS

    every = [f.name for f in FORMATS if f.takes == EVERY]
    judged = [f.name for f in FORMATS if f.takes == JUDGING]
    for info in COMMANDS:
        words = ["escape", "status"] if info.name == "escape" else [info.name]
        expected = every + (judged if info.name in judging() else [])
        assert _completed(*words, "-o", "") == expected, info.name
    assert _completed("find-flags", "--fix", "-o", "") == [f.name for f in FORMATS]  # patch with --fix only
    assert "patch" not in _completed("find-flags", "-o", "")


def _connection_with_bearer():
    from kubectl_kvdtype._sources.connection import CONNECTION_FLAGS, ConnectionFlag

    bearer = ConnectionFlag(("--bearer",), "bearer", "the bearer token again", metavar="TOKEN", secret=True,
                            header=True, option="token", replaces=("user", "token"), completes="users")
    return (*CONNECTION_FLAGS, bearer)


def test_a_connection_flag_row_is_parsed_overrides_is_redacted_and_completed(tmp_path):
    from kubectl_kvdtype._cli.main import parse
    from kubectl_kvdtype._cli.registry import build_parser
    from kubectl_kvdtype._commands.command import connection_of
    from kubectl_kvdtype._commands.flags import secrets_in

    table = _connection_with_bearer()
    parser = build_parser(connection=table)
    assert "--bearer TOKEN" in parser.format_help()
    for each in (parser, _subparser(parser, "check"), _subparser(_subparser(parser, "escape"), "rebind")):
        assert "--bearer" in each._option_string_actions
    options = parse(["check", "-f", str(EXAMPLES), "--bearer", "s3cret"], connection=table)
    connection = connection_of(options, table)
    assert connection.token == "s3cret" and connection.overrides
    assert connection.replaced("user") == {"token": "s3cret"}
    assert "s3cret" not in repr(connection)
    with pytest.raises(UsageError, match="unrecognized arguments: --bearer"):
        parse(["check", "-f", str(EXAMPLES), "--bearer", "s3cret"])  # the real table has no such row
    assert secrets_in(["check", "--bearer=s3cret", "--bear", "other"], table) == ["s3cret", "other"]
    assert secrets_in(["check", "--bearer=s3cret"]) == []
    with pytest.raises(UsageError, match="--bearer holds a line break") as refused:
        parse(["check", "-f", str(EXAMPLES), "--bearer", "a\nb"], connection=table)
    assert "a\nb" not in refused.value.message
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text("users:\n- name: alice\n- name: bob\n")
    assert "--bearer" in _completed("check", "--be", connection=table)
    assert _completed("--kubeconfig", str(kubeconfig), "check", "--bearer", "a", connection=table) == ["alice"]
    manpage = pytest.importorskip("argparse_manpage.manpage", reason="the `build` extra is not installed")
    assert "\\-\\-bearer" in str(manpage.Manpage(parser))


def test_connection_options_have_a_field_for_each_row_and_keep_secrets_out_of_repr():
    from kubectl_kvdtype._commands.flags import DEFAULTS, SECRET_FLAGS
    from kubectl_kvdtype._kits.records import fields
    from kubectl_kvdtype._sources.connection import CONNECTION_FLAGS, REPEATED, ConnectionOptions

    declared = {f.name: f for f in fields(ConnectionOptions)}
    filled = {row.field for row in CONNECTION_FLAGS if row.field is not None}
    assert set(declared) == filled | {"request_timeout", "table"}
    assert {name for name, f in declared.items() if not f.repr} - {"table"} == \
        {row.field for row in CONNECTION_FLAGS if row.secret}
    assert set(SECRET_FLAGS) == {row.flag for row in CONNECTION_FLAGS if row.secret}
    from kubectl_kvdtype._cli.registry import build_parser

    repeated = {a.dest for a in build_parser()._actions if getattr(a, "global_flag", False)
                and isinstance(a, argparse._AppendAction)}
    assert {row.dest for row in CONNECTION_FLAGS if row.value == REPEATED} <= repeated
    assert all(DEFAULTS[row.dest] == row.default for row in CONNECTION_FLAGS)


#: The argv forms the tests use, global flags before and after the subcommand (and the action).
_SAME = [
    (["-n", "team-a", "check"], ["check", "-n", "team-a"]),
    (["-o", "json", "--context", "fake", "escape", "status"], ["escape", "status", "-o", "json", "--context", "fake"]),
    (["-o", "json", "escape", "status"], ["escape", "-o", "json", "status"]),
    (["--as", "u", "--as-group", "a", "--as-group", "b", "check"],
     ["check", "--as=u", "--as-group", "a", "--as-group=b"]),
    (["-f", "a", "-f", "b", "verify"], ["-f", "a", "verify", "-f", "b"]),
    (["--insecure-skip-tls-verify", "preflight"], ["preflight", "--insecure-skip-tls-verify=true"]),
]


@pytest.mark.parametrize(("before", "after"), _SAME, ids=lambda words: " ".join(words))
def test_global_flags_read_the_same_before_and_after_the_subcommand(before, after):
    from kubectl_kvdtype._cli.main import parse

    def parsed(argv: list[str]) -> dict:
        found = vars(parse(argv))
        return {key: value for key, value in found.items() if key not in ("argv", "handler")}

    assert parsed(before) == parsed(after)


def test_repeated_global_flags_add_up_across_every_level():
    from kubectl_kvdtype._cli.main import parse

    options = parse(["--as", "u", "--as-group", "a", "escape", "--as-group", "b", "rebind", "legacy",
                     "--dtype", "bfloat16", "--as-group", "c"])
    assert options.as_group == ["a", "b", "c"]
    assert parse(["-n", "x", "check", "-n", "y"]).namespace == "y"  # a later value wins


def test_a_subcommand_help_lists_its_own_flags_and_points_to_the_global_ones():
    from kubectl_kvdtype._cli.registry import PROG, build_parser
    from kubectl_kvdtype._commands.flags import GLOBAL_HEADING

    parser = build_parser()
    top = parser.format_help()
    global_helps = [a.help for a in parser._actions if getattr(a, "global_flag", False)]
    assert GLOBAL_HEADING in top and all(" ".join(h.split()[:4]) in " ".join(top.split()) for h in global_helps)
    subs = [_subparser(parser, name) for name in ("check", "find-flags", "escape")]
    subs += [_subparser(subs[-1], "rebind"), _subparser(subs[-1], "status")]
    for sub in subs:
        text = " ".join(sub.format_help().split())
        assert f"'{PROG} --help' lists them" in text, sub.prog
        assert not any(" ".join(h.split()) in text for h in global_helps), sub.prog  # no global flag's own help
    assert "--fix" in subs[1].format_help() and "--dtype" in subs[3].format_help()


def test_the_man_page_prints_each_global_flag_once():
    manpage = pytest.importorskip("argparse_manpage.manpage", reason="the `build` extra is not installed")
    from kubectl_kvdtype._cli.registry import build_parser

    parser = build_parser()
    page = str(manpage.Manpage(parser))
    for action in parser._actions:
        if getattr(action, "global_flag", False):
            long = next(o for o in action.option_strings if o.startswith("--"))
            assert page.count("\\fB" + long.replace("-", "\\-") + "\\fR") == 1, long


def test_each_flag_says_what_it_is_to_a_run_and_only_overriding_ones_make_a_refusal_a_usage_error():
    """A row's role is the one statement of it: --help's selecting group and ``overrides`` derive from it."""
    from kubectl_kvdtype._sources.connection import (
        CONNECTION_FLAGS,
        HOW_IT_RUNS,
        OVERRIDES,
        SELECTING,
        SELECTS,
        ConnectionOptions,
    )

    assert {flag.role for flag in CONNECTION_FLAGS} == {OVERRIDES, SELECTS, HOW_IT_RUNS}
    assert SELECTING == ("kubeconfig", "context")
    assert not ConnectionOptions(kuberc="k", verbosity=6, warnings_as_errors=True, context="c").overrides
    assert ConnectionOptions(server="https://x").overrides and ConnectionOptions(impersonate="u").overrides
