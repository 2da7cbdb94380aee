"""`--fail-on` as the parser defines it: one flag shared by the four judging subcommands
(test_junit.py tests what it does to a run)."""

from __future__ import annotations

import argparse

import pytest

from _support import JUDGING

pytestmark = pytest.mark.version_sensitive  # the parser is argparse's (test_tiers.py)


def _parsers() -> dict[str, argparse.ArgumentParser]:
    from kubectl_kvdtype._cli.registry import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_the_four_judging_subcommands_share_one_fail_on_and_the_others_have_none():
    parsers = _parsers()
    seen = set()
    for name, parser in parsers.items():
        actions = [a for a in parser._actions if "--fail-on" in a.option_strings]
        if name in JUDGING:
            (action,) = actions
            seen.add((tuple(action.option_strings), tuple(action.choices), action.default, action.help))
        else:
            assert actions == [], name
    assert len(seen) == 1
    ((_, choices, default, text),) = seen
    assert (choices, default) == (("error", "warning"), "error")
    assert "default error" in text
