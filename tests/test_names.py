"""The name rules, the one request-path builder and the one display-safety function, in process."""

from __future__ import annotations

import sys
import unicodedata

import pytest

from kubectl_kvdtype._kits.display import shown
from kubectl_kvdtype._kits.status import KvdtypeError
from kubectl_kvdtype._sources import names as _names


@pytest.mark.parametrize("value, rule, expected", [
    ("team-a", _names.LABEL, []),
    ("a.b", _names.SUBDOMAIN, []),
    ("../../x", _names.LABEL, ["may not contain '/'"]),
    ("..", _names.SUBDOMAIN, ["may not be '..'"]),
    ("a%2Fb", _names.SUBDOMAIN, ["may not contain '%'"]),
    ("", _names.LABEL, ["may not be empty"]),
    ("", _names.LABEL_VALUE, []),
    ("My_Value", _names.LABEL_VALUE, []),
])
def test_problems_are_the_api_servers(value, rule, expected):
    assert _names.problems(value, rule) == expected


def test_a_label_is_at_most_63_characters_and_lower_case():
    assert _names.problems("a" * 63, _names.LABEL) == []
    assert _names.problems("a" * 64, _names.LABEL) == ["must be no more than 63 characters"]
    assert _names.problems("a.b", _names.LABEL)[0].startswith("a lowercase RFC 1123 label")
    assert _names.problems("A", _names.SUBDOMAIN)[0].startswith("a lowercase RFC 1123 subdomain")


@pytest.mark.e2e  # importing the kubernetes client opens a socket
def test_request_path_encodes_each_segment_whole_and_refuses_dot_segments():
    from kubectl_kvdtype._sources.cluster import _encoded, request_path

    assert request_path("api", "v1", "a/b?c=d#e%") == "/api/v1/a%2Fb%3Fc%3Dd%23e%25"
    assert _encoded(request_path("api", "v1", "a/b")) == "/api/v1/a%2Fb"  # the same path, never encoded twice
    for bad in ("..", ".", ""):
        with pytest.raises(KvdtypeError):
            request_path("api", bad)
    with pytest.raises(KvdtypeError):
        _encoded("/apis/x/v1/namespaces/../../api/v1/secrets")


def test_shown_escapes_every_character_that_is_not_printable():
    assert shown("fp8\x1b]0;t\x07\n\u202e\u200b\t é") == "fp8\\x1b]0;t\\x07\\n\\u202e\\u200b\\t é"
    unsafe = [chr(c) for c in range(sys.maxunicode + 1)
              if unicodedata.category(chr(c)) in ("Cc", "Cf", "Zl", "Zp")]
    assert all("\\" in shown(c) and c not in shown(c) for c in unsafe)


_NAME_ALPHABET = "az09-._/%AZ é\n"


@pytest.mark.parametrize("rule", [_names.LABEL, _names.SUBDOMAIN])
@pytest.mark.parametrize("value", [
    "team-a", "a.b", "a", "0", "-a", "a-", "a..b", ".", "..", "a/b", "a%2f", "", "A", "é", "a\n", " a",
    "a" * 63, "a" * 64, ".".join(["a" * 63] * 4)[:253], "a" * 254, None, 3, b"a", ["a"],
])
def test_the_one_match_fast_path_agrees_with_the_full_check(value, rule):
    """A big list checks each object's name in one match (``_plainly_valid``); it must accept
    exactly what ``problems`` finds nothing wrong with, or an invalid name would be judged."""
    assert _names._plainly_valid(value, rule) == (_names.problems(value, rule) == [])


def test_the_fast_path_agrees_on_generated_names():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=400, deadline=None)
    @given(value=st.text(alphabet=_NAME_ALPHABET, max_size=70), rule=st.sampled_from([_names.LABEL, _names.SUBDOMAIN]))
    def agree(value, rule):
        assert _names._plainly_valid(value, rule) == (_names.problems(value, rule) == [])

    agree()


def test_a_listed_page_keeps_and_refuses_what_refusal_does_object_by_object():
    """A LIST's page is checked in one loop (``listed_refusals``): it keeps, in order, exactly the
    mappings ``refusal`` finds nothing wrong with, and words each other one as ``refusal`` does."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from kubectl_kvdtype._sources.kinds import BINDING, POD, POOL

    text = st.text(alphabet=_NAME_ALPHABET, max_size=12) | st.sampled_from(["team-a", "a.b", "..", "A"])
    value = st.none() | st.integers(0, 3) | text | st.lists(text, max_size=2) | st.dictionaries(text, text, max_size=1)
    metadata = st.fixed_dictionaries({}, optional={"name": value, "namespace": value})
    listed = st.none() | st.integers() | st.text(max_size=3) | st.builds(dict, metadata=metadata) \
        | st.fixed_dictionaries({"metadata": st.none() | st.integers()})

    @settings(max_examples=300, deadline=None)
    @given(objects=st.lists(listed, max_size=8), kind=st.sampled_from([POD, BINDING, POOL]))
    def agree(objects, kind):
        kept, found = _names.listed_refusals(kind, objects, "the test's list")
        expected_kept, expected_found = [], []
        for obj in objects:
            if not isinstance(obj, dict):
                continue
            meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
            finding = _names.refusal(kind, meta.get("namespace") or "", meta.get("name"), "the test's list")
            (expected_kept.append(obj) if finding is None else expected_found.append(finding))
        assert [id(o) for o in kept] == [id(o) for o in expected_kept]
        assert found == expected_found

    agree()
