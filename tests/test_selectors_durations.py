"""Fast tier: label selectors read offline (``_sources``) and kubectl-style durations (``_flags``)."""

from __future__ import annotations

import argparse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _support import EXAMPLES, in_process
from fakekube import ApiError, label_matcher
from kubectl_kvdtype._cli.main import parse
from kubectl_kvdtype._commands.command import connection_of
from kubectl_kvdtype._commands.flags import DURATION_FORMS, _request_timeout, parse_duration
from kubectl_kvdtype._sources.kinds import matches_selector

# Imported with the module: urllib3 opens a socket at import (its IPv6 probe), which the fast tier forbids.
from kubectl_kvdtype._sources.kubeconfig import ConnectionOptions  # noqa: F401

pytestmark = pytest.mark.version_sensitive  # argparse, the argv reader, completion or the man page (test_tiers.py)

LABELS = {"app": "llama", "tier": "gpu", "kvcache.gpustack.ai/inject": "true", "empty": ""}


@pytest.mark.parametrize("selector, expected", [
    ("", True),
    ("app=llama", True), ("app==llama", True), ("app=qwen", False),
    ("app!=qwen", True), ("app!=llama", False), ("missing!=x", True),  # != also matches an absent key
    ("app", True), ("missing", False), ("!missing", True), ("!app", False),
    ("app in (llama, qwen)", True), ("app in (qwen)", False), ("missing in (x)", False),
    ("app notin (qwen)", True), ("app notin (llama,qwen)", False), ("missing notin (x)", True),
    ("app=llama,tier=gpu", True), ("app=llama,tier=cpu", False),
    ("app in (llama,qwen),tier notin (cpu)", True),  # commas inside parentheses are not separators
    ("kvcache.gpustack.ai/inject=true", True),
    ("empty=", True), ("empty", True), ("app=", False),
    ("  app = llama ,  tier  ", True),
])
def test_selector_forms(selector, expected):
    assert matches_selector(LABELS, selector) is expected


@pytest.mark.parametrize("selector", ["app=llama=x", "a b", "app in llama", "=x", "app==(x)"])
def test_unreadable_requirements_are_refused_not_guessed(selector):
    with pytest.raises(ValueError, match="cannot read the label selector"):
        matches_selector(LABELS, selector)


_KEYS = st.sampled_from(["app", "tier", "missing", "kvcache.gpustack.ai/inject"])
_VALUES = st.sampled_from(["llama", "qwen", "gpu", "true", ""])
_REQUIREMENTS = st.one_of(
    st.builds("{}={}".format, _KEYS, _VALUES), st.builds("{}=={}".format, _KEYS, _VALUES),
    st.builds("{}!={}".format, _KEYS, _VALUES), _KEYS, st.builds("!{}".format, _KEYS),
    st.builds(lambda k, vs, op: f"{k} {op} ({','.join(vs)})", _KEYS,
              st.lists(_VALUES.filter(bool), min_size=1, max_size=3), st.sampled_from(["in", "notin"])),
)


@settings(max_examples=300, deadline=None)
@given(requirements=st.lists(_REQUIREMENTS, max_size=4),
       labels=st.dictionaries(_KEYS, _VALUES, max_size=4))
def test_offline_selectors_select_what_the_api_server_would(requirements, labels):
    # The oracle: the fake API server's own selector code (what a LIST with labelSelector returns),
    # written apart from the plugin's, run here in process.
    selector = ",".join(requirements)
    server = label_matcher(selector)
    expected = True if server is None else server({"metadata": {"labels": labels}})
    assert matches_selector(labels, selector) is expected, selector


def test_the_oracle_refuses_what_the_plugin_refuses():
    with pytest.raises(ApiError):
        label_matcher("a b")
    with pytest.raises(ValueError):
        matches_selector({}, "a b")


@pytest.mark.parametrize("text, seconds", [
    ("30s", 30.0), ("1m30s", 90.0), ("500ms", 0.5), ("1h", 3600.0), ("2h5m", 7500.0), ("1.5s", 1.5),
    ("10", 10.0), ("2.5", 2.5), ("0", 0.0), (" 45s ", 45.0), ("1m0s", 60.0), ("1s500ms", 1.5),
])
def test_durations(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "s", "10min", "1x", "1m 30s", "-1s", "30S", "1,5s", "m1", "1e3", "ten"])
def test_bad_durations_name_the_accepted_forms(text):
    with pytest.raises(argparse.ArgumentTypeError) as error:
        parse_duration(text)
    assert repr(text) in str(error.value) and DURATION_FORMS in str(error.value)


def test_a_zero_request_timeout_means_no_limit():
    assert _request_timeout("0") is None and _request_timeout("0s") is None
    assert _request_timeout("250ms") == 0.25


def test_a_bad_request_timeout_is_a_usage_error_of_the_whole_command():
    status, out, err = in_process(["verify", "-f", str(EXAMPLES), "--request-timeout", "10min"])
    assert status == 2 and out == ""
    assert "invalid duration '10min'" in err and DURATION_FORMS in err
    assert len([line for line in err.splitlines() if line.strip()]) == 1, err


@pytest.mark.parametrize(("flags", "seconds"), [
    ([], 30.0), (["--request-timeout", "0"], None), (["--request-timeout", "1m30s"], 90.0),
    (["--request-timeout=500ms"], 0.5),
])
def test_the_default_timeout_is_30s_and_0_means_none(flags, seconds):
    """What the connection carries, in process: the 30 s default is the point here, and waiting
    it out would cost the suite 30 s (the behaviour is the e2e tests' with short values)."""
    for argv in (["check", *flags], [*flags, "check"]):  # global flags before or after the subcommand
        assert connection_of(parse(argv)).request_timeout == seconds
