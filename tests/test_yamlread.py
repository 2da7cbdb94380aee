"""The fast YAML reader gives exactly what PyYAML's safe loader gives, errors included.

``_yamlread.load_all`` builds objects from libyaml's events instead of PyYAML's nodes. Results are
compared as ``repr`` (stricter than ``==``: key order, ``1`` against ``1.0`` or ``True``, and NaN,
which equals nothing) with ``yaml.load_all`` under the loader the plugin used before
(``_yamlread.SAFE_LOADER``), on the bundled examples, on documents PyYAML's dumper writes in every
style, and on hand-written text full of the YAML 1.1 plain scalars a human writes (``yes``,
``010``, ``1:20``, ``~``, dates) and of what the reader leaves to PyYAML (anchors, merge keys, tags,
errors). Where the fast path applies, a test also checks that it was taken.
"""

from __future__ import annotations

import datetime

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from _support import EXAMPLES
from kubectl_kvdtype._sources import yamlread as _yamlread

pytestmark = pytest.mark.skipif(_yamlread.CParser is None, reason="PyYAML without libyaml: nothing to compare")


def pyyaml(text: str) -> str:
    """What PyYAML's safe loader makes of ``text``, or the error it raises, as comparable text."""
    try:
        return repr(list(yaml.load_all(text, Loader=_yamlread.SAFE_LOADER)))
    except Exception as error:  # noqa: BLE001 - any error: the reader must raise the same
        return f"{type(error).__name__}: {error}"


def ours(text: str) -> str:
    try:
        return repr(_yamlread.load_all(text))
    except Exception as error:  # noqa: BLE001
        return f"{type(error).__name__}: {error}"


def fast_path(text: str) -> str:
    """The events reader alone, without the fall-back to PyYAML (raises where it would fall back)."""
    return repr(_yamlread._Reader(text).documents())


#: Plain scalars YAML 1.1 gives a meaning (PyYAML's resolver), and look-alikes that stay strings.
PLAIN = [
    "yes", "Yes", "YES", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF", "y", "Y", "n", "N",
    "true", "True", "TRUE", "false", "False", "FALSE", "tRUE", "yEs", "null", "Null", "NULL", "~", "nUll",
    "0", "-0", "+12", "010", "0o17", "0x1F", "0X1f", "0b101", "1_000", "1:20", "-1:20", "190:20:30",
    "1.5", "-1.5e3", "1e3", "1.0e+3", "6.8523015e+5", ".5", "1.", "1:20.5", ".inf", "-.Inf", "+.INF", ".nan",
    ".NaN", ".NAN", "2002-12-14", "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10 -5",
    "2001-12-15T02:59:43.1Z", "2001-12-14T21:59:43", "2024-13-45", "12:30", "0.0.0.0", "8000", "fp8_e4m3",
    "bf16", "team-a", "v0.29.0", "0.5.18", "-", "=x", "-x", "+", ".", "1-2", "nan", "inf", "0o", "0x",
    "true_false", "onion", "off-by-one", "Norway", "élan", "日本",
]

#: Whole documents: ordinary ones the fast path reads, and what it leaves to PyYAML.
TEXTS = [
    "",
    "# only a comment\n",
    "---\n",
    "--- \n...\n",
    "a: 1\n---\nb: 2\n...\n---\n- x\n",
    "a:\nb: ~\nc: null\n",
    "key: |\n  line one\n  line two\n\n",
    "key: >-\n  folded\n  text\n\nnext: |+\n  kept\n\n",
    "a: 'it''s'\nb: \"tab\\tnew\\nline \\u00e9 \\x41\"\nc: plain text with # inside\n",
    "a: multi\n  line\n  plain\nb: \"multi\n  line quoted\"\n",
    "{a: 1, b: [x, y, {c: d}], e: {}}\n",
    "[1, 2, [3, [4]], {}, []]\n",
    "- - nested\n  - list\n- k: v\n  l: w\n",
    "? complex key\n: value\n",
    "? [a, b]\n: value\n",
    "? {a: b}\n: value\n",
    "1: int key\n1.5: float key\ntrue: bool key\n~: null key\n2002-12-14: date key\n",
    "a: 1\na: 2\nb: 3\n",
    ".nan: 1\n.nan: 2\n",
    "base: &b {x: 1, y: 2}\nuse: *b\n",
    "base: &b {x: 1}\nmerged:\n  <<: *b\n  y: 2\n",
    "merged:\n  <<: [{a: 1}, {b: 2}]\n  c: 3\n",
    "a: &x 5\nb: *x\n",
    "a: *undefined\n",
    "a: &x 1\nb: &x 2\n",
    "=: value\n",
    "a: =\n",
    "a: !!str 123\nb: !!int \"7\"\nc: !!float 1\nd: !!bool yes\ne: !!null ''\nf: ! 12\n",
    "a: !!binary aGVsbG8=\nb: !!timestamp 2002-12-14\n",
    "a: !!map {x: 1}\nb: !!seq [1]\nc: !!str x\n",
    "a: !!set {x, y}\nb: !!omap [x: 1, y: 2]\nc: !!pairs [x: 1, x: 2]\n",
    "a: !custom x\n",
    "a: !!int abc\n",
    "a: !!map x\n",
    "%YAML 1.1\n---\na: 1\n",
    "%TAG !k8s! tag:yaml.org,2002:\n---\na: !k8s!str 1\n",
    "a: b: c\n",
    "a: [1, 2\n",
    "a: 'open\n",
    "- a\nb: c\n",
    "a:\n\t- tab\n",
    "\ufeffa: bom\n",
    "a: \u0085 next line\n",
    # "&r [*r]\n", a recursive alias, is refused by design (tests/test_bounded_reader.py).
]


@pytest.mark.parametrize("text", TEXTS)
def test_hand_written_documents_read_alike(text):
    assert ours(text) == pyyaml(text)


@pytest.mark.parametrize("value", PLAIN)
def test_every_plain_scalar_means_what_it_means_to_pyyaml(value):
    text = f"{value}: {value}\nlist: [{value}, x]\nblock:\n- {value}\n"
    assert ours(text) == pyyaml(text)
    if "Error" not in pyyaml(text):
        assert fast_path(text) == pyyaml(text)


def test_the_bundled_examples_read_alike_through_the_fast_path():
    files = sorted(EXAMPLES.glob("*.yaml"))
    assert files
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert fast_path(text) == pyyaml(text), path.name


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=12),
    st.sampled_from(PLAIN), st.dates(), st.datetimes(),
    st.datetimes(timezones=st.sampled_from([datetime.timezone.utc, datetime.timezone(datetime.timedelta(hours=-5))])),
)
keys = st.one_of(st.text(max_size=8), st.sampled_from(PLAIN), st.integers(), st.booleans(), st.none())
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
                      max_leaves=25)


@settings(max_examples=300, deadline=None)
@given(documents=st.lists(values, min_size=1, max_size=3), flow=st.sampled_from([False, True, None]),
       width=st.sampled_from([8, 80]), canonical=st.booleans(), explicit_start=st.booleans())
def test_what_pyyaml_writes_in_any_style_reads_alike(documents, flow, width, canonical, explicit_start):
    text = yaml.safe_dump_all(documents, default_flow_style=flow, width=width, canonical=canonical,
                              explicit_start=explicit_start, allow_unicode=True)
    expected = pyyaml(text)
    assert ours(text) == expected
    if not canonical:  # canonical style tags every scalar: still read, but mostly left to PyYAML
        assert fast_path(text) == expected


@settings(max_examples=300, deadline=None)
@given(pairs=st.lists(st.tuples(st.sampled_from(PLAIN + ["k", "key"]), st.sampled_from(PLAIN)), min_size=1,
                      max_size=6),
       style=st.sampled_from(["block", "flow", "list", "nested"]))
def test_hand_written_plain_scalars_read_alike(pairs, style):
    """Text as a human types it: plain scalars written raw, not quoted by a dumper."""
    if style == "block":
        text = "".join(f"{k}: {v}\n" for k, v in pairs)
    elif style == "flow":
        text = "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}\n"
    elif style == "list":
        text = "".join(f"- {v}\n" for _, v in pairs)
    else:
        text = "top:\n" + "".join(f"  {k}:\n  - {v}\n  - [{v}, {k}]\n" for k, v in pairs)
    assert ours(text) == pyyaml(text)


def test_shared_anchors_stay_shared_as_pyyaml_shares_them():
    [document] = _yamlread.load_all("base: &b {x: 1}\nuse: *b\n")
    assert document["base"] is document["use"]
