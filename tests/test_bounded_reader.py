"""Fast tier: the bounded readers (``_kits/bounded``, ``_kits/files``, ``_sources/yamlread``), the
settings table (``_kits/settings``), kubectl's duration grammar and the one cutting helper.

The end-to-end cases, each input through the real kubectl, are in tests/test_hostile_input.py.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _support import ROOT
from kubectl_kvdtype._engines.parsers import shipped_document
from kubectl_kvdtype._kits import bounded, files
from kubectl_kvdtype._kits import settings as kvsettings
from kubectl_kvdtype._kits.display import cut, cut_words
from kubectl_kvdtype._kits.status import UsageError
from kubectl_kvdtype._sources import yamlread

pytestmark = pytest.mark.version_sensitive  # the flag parser's durations (test_tiers.py)


# --- JSON nesting, found before parsing --------------------------------------------------------

def _depth(value: object) -> int:
    """The nesting of a parsed value (the reference the text scan is compared with)."""
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


#: Strings that try to fool a scan: brackets, quotes, backslashes, escapes, JSON inside a string.
_TRICKY = st.one_of(st.text(alphabet='[]{}"\\/ \n\tabc\u00e9\u202e', max_size=12),
                    st.sampled_from(["]", "[", "}", "{", '\\"', "\\", '{"a": [1, {"b": "]"}]}', "\\\\\"", "\ud800"]))
_VALUES = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), _TRICKY),
                       lambda inner: st.one_of(st.lists(inner, max_size=4),
                                               st.dictionaries(_TRICKY, inner, max_size=4)),
                       max_leaves=40)


@settings(max_examples=300, deadline=None)
@given(value=_VALUES, ascii_only=st.booleans())
def test_the_scan_finds_the_depth_json_parses(value, ascii_only):
    text = json.dumps(value, ensure_ascii=ascii_only)
    depth = _depth(value)
    assert bounded.too_deep(text, depth) is False, text
    if depth:
        assert bounded.too_deep(text, depth - 1) is True, text
    assert bounded.too_deep(text.encode("utf-8", "surrogatepass"), depth) is False


@pytest.mark.parametrize("text", [
    "[" * 100_000 + "]" * 100_000,
    '{"a":' * 1_500 + "1" + "}" * 1_500,
    # Each level hides a closing bracket in a string after its opener and an opening one before
    # its closer: a scan that ignored strings would pair them up and see depth 1.
    '["]",' * 300 + "1" + ',"["]' * 300,
    "[" * 100_000,  # never closed: not JSON either, and refused before json recurses into it
])
def test_hostile_nesting_is_too_deep(text):
    assert bounded.too_deep(text)
    with pytest.raises(bounded.TooDeep, match="nested more than 100 levels deep"):
        bounded.loads(text)


def test_brackets_in_strings_do_not_count():
    inner = json.dumps({"spec": [[[[{"x": "]]]]"}]]]]})
    document = {"metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": inner * 50}},
                "s": "[" * 500, "t": "\\" * 7 + '"' + "{" * 300}
    assert bounded.loads(json.dumps(document)) == document


def test_at_the_limit_is_read():
    text = "[" * bounded.MAX_DEPTH + "]" * bounded.MAX_DEPTH
    assert _depth(bounded.loads(text)) == bounded.MAX_DEPTH
    with pytest.raises(bounded.TooDeep):
        bounded.loads("[" + text + "]")


# --- YAML: depth and aliases ---------------------------------------------------------------------

def _laughs(levels: int, width: int = 9) -> str:
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    names = "abcdefghijklmnop"
    for n in range(1, levels):
        lines.append(f"{names[n]}: &{names[n]} [{', '.join('*' + names[n - 1] for _ in range(width))}]")
    return "\n".join(lines) + "\nkind: Pod\n"


def test_a_billion_laughs_is_refused_in_kubectls_words():
    with pytest.raises(bounded.ExcessiveAliasing, match="document contains excessive aliasing"):
        yamlread.load_all(_laughs(9))


def test_a_merge_key_bomb_is_refused_too():
    lines = ["a: &a {" + ", ".join(f"k{i}: {i}" for i in range(9)) + "}"]
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} {{<<: [{', '.join('*' + previous for _ in range(9))}]}}")
    with pytest.raises(bounded.ExcessiveAliasing):
        yamlread.load_all("\n".join(lines) + "\n")


def test_an_alias_to_a_long_string_counts_what_it_costs():
    text = f"a: &a {'x' * 10_000}\nb: [{', '.join(['*a'] * 20_000)}]\n"  # 200 kB of text, 200 MB expanded
    with pytest.raises(bounded.ExcessiveAliasing):
        yamlread.load_all(text)


def test_ordinary_anchors_read_as_pyyaml_reads_them():
    text = "base: &b {x: 1, y: [1, 2]}\nuse: *b\nmerged: {<<: *b, z: 3}\nlist: [*b, *b, *b]\n"
    assert yamlread.load_all(text) == [{"base": {"x": 1, "y": [1, 2]}, "use": {"x": 1, "y": [1, 2]},
                                        "merged": {"x": 1, "y": [1, 2], "z": 3},
                                        "list": [{"x": 1, "y": [1, 2]}] * 3}]
    assert not bounded.excessive_aliasing(1_000_000, 10_000)


def test_go_yamls_ratio():
    assert bounded.excessive_aliasing(1001, 992) and not bounded.excessive_aliasing(1001, 990)
    assert not bounded.excessive_aliasing(1000, 999)  # too small to judge, as in go-yaml
    assert bounded.excessive_aliasing(4_000_000, 400_001) and not bounded.excessive_aliasing(4_000_000, 399_999)


def test_an_anchor_holding_itself_is_refused():
    # PyYAML would build a list that contains itself: every walk of it would recurse for ever.
    with pytest.raises(bounded.ExcessiveAliasing, match="anchor 'r' value contains itself"):
        yamlread.load_all("&r [*r]\n")


@pytest.mark.parametrize("text", [
    "- " * 101 + "x\n",
    "[" * 101 + "]" * 101 + "\n",
    "a: " + "{b: " * 101 + "1" + "}" * 101 + "\n",
    # An alias puts its anchor's depth where it stands: 60 + 50 levels.
    "a: &x " + "[" * 60 + "]" * 60 + "\nb: " + "[" * 50 + "*x" + "]" * 50 + "\n",
])
def test_yaml_deeper_than_the_limit_is_refused(text):
    with pytest.raises(bounded.TooDeep):
        yamlread.load_all(text)


def test_yaml_at_the_limit_is_read():
    assert yamlread.load_all("- " * 100 + "x\n")[0] is not None


# --- JSON read as YAML reads it -------------------------------------------------------------------

def _as_yaml_reads(text: str) -> str:
    try:
        return repr(yamlread.load_all(text)[0])
    except Exception as error:  # noqa: BLE001 - compared as text: the JSON reader must not read it then
        return f"{type(error).__name__}: {error}"


#: Keys and strings with what JSON and YAML write differently: escapes, line breaks, controls, quotes,
#: surrogates, non-characters, YAML's indicators, and long ones.
_JSON_TEXT = st.one_of(st.text(max_size=8),
                       st.text(alphabet="\"\\/\n\t\r\x00\x7f\x85\u2028\ufeff\ufffe\U0001f600é #:&*!|>-?{}[],'%@`",
                               max_size=8),
                       st.sampled_from(["", "k" * 151, "é" * 150, "yes", "1e5", "~", "null", "---", "\ud800"]))
_JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), _JSON_TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_JSON_TEXT, inner, max_size=4)),
    max_leaves=30)


@settings(max_examples=400, deadline=None)
@given(value=st.dictionaries(_JSON_TEXT, _JSON_VALUES, max_size=5), ascii_only=st.booleans(),
       indent=st.sampled_from([None, 0, 2, "\t", " " * 120]), compact=st.booleans())
def test_json_is_read_as_yaml_reads_it_or_left_to_yaml(value, ascii_only, indent, compact):
    """Whatever JSON text ``json`` writes, the JSON reader gives what the YAML reader gives, or
    leaves it to the YAML reader (None): never another value, nor a text YAML refuses."""
    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent, separators=(",", ":") if compact else None)
    read = bounded.loads_as_yaml(text)
    if read is not None:
        assert repr(read) == _as_yaml_reads(text), text


@pytest.mark.parametrize("text", [
    '{"a":"\\ud83d\\ude00"}',  # one character to json, an error to YAML
    '{"a":1e5}', '{"a":1.5e5}', '{"a":1E+5}', '{"a":NaN}', '{"a":-Infinity}',  # strings to YAML 1.1
    '{"a"\n:1}', '{"a":1,\n"b"\t\n:2}',  # a key parted from its colon by a line break
    '{"' + "k" * 1100 + '":1}', '{"' + "\\u00e9" * 300 + '":1}', '{"a"' + " " * 1100 + ":1}",  # longer than a YAML key
    '{"a":"\x7f"}', '{"a":"\x85"}', '{"a":"\ufffe"}',  # refused by YAML, or a line break to it
    '{"a":' + "[" * 100 + "]" * 100 + "}",  # too deep: the YAML reader refuses it in its words
    '{"a": 1,}', '{"a": [}', '{"a": 1} # a comment', '{"a": 1}\n---\n{}', '\ufeff{"a": 1}', '["a"]', "a: 1",  # not JSON
])
def test_what_yaml_reads_otherwise_is_left_to_it(text):
    assert bounded.loads_as_yaml(text) is None


@pytest.mark.parametrize("text", [
    json.dumps({"apiVersion": "v1", "kind": "Config", "clusters": [{"name": "c", "cluster": {"server": "https://h:6443"}}],
                "preferences": {}, "x": [1, -0, 1.5, -0.0, True, None, "é\u2029", "\\u2028", "a\"b", "\x85 \x7f"]},
               indent=2),
    '{\n\t"a": "x\\/y\\b\\f\\n\\r\\t\\u0000",\n\t"b": [\n\t\t{}\n\t]\n}\n',
    '  {"a" : 1 , "a":2, "' + "k" * 150 + '"' + " " * 99 + ': {"b": ' + "[" * 98 + "]" * 98 + "}}",
])
def test_ordinary_json_is_read_without_yaml(text):
    read = bounded.loads_as_yaml(text)
    assert read == json.loads(text) and repr(read) == _as_yaml_reads(text)


@pytest.mark.parametrize("text", ['{"kind": "Config", "clusters": [{"name": "c"}]}', '{"kind": "Config",}', '{"a": [}',
                                  '{"a": ' + "[" * 100 + "]" * 100 + "}", '{"a":"\\ud83d\\ude00"}', "{}"])
def test_a_json_kubeconfig_is_read_and_refused_as_a_yaml_one(tmp_path, text):
    """Whichever reader reads it: the same mapping, or the same sentence."""
    from kubectl_kvdtype._kits.status import KvdtypeError
    from kubectl_kvdtype._sources import connection

    path = tmp_path / "kubeconfig"
    path.write_text(text)
    results = []
    for read in (lambda: connection.read_kubeconfig(str(path)), lambda: connection._yaml_kubeconfig(str(path), text)):
        try:
            results.append(repr(read()))
        except KvdtypeError as error:
            results.append(error.message)
    assert results[0] == results[1]


# --- Files ----------------------------------------------------------------------------------------

RULE = files.FileRule("a test file", 1 << 20, "the most a test reads", "set NOTHING", pipes=files.READ)
REFUSING = files.FileRule("a test file", 1 << 20, "the most a test reads", reads="name a regular file")


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "x.yaml"
    os.mkfifo(fifo)
    started = time.monotonic()
    with pytest.raises(files.Unreadable, match="is a FIFO .*not a test file: name a regular file"):
        files.read_bytes(str(fifo), REFUSING)
    assert time.monotonic() - started < 5


def test_a_fifo_is_read_to_its_end_where_the_rule_reads_one(tmp_path):
    fifo = tmp_path / "kubeconfig"
    os.mkfifo(fifo)

    def write() -> None:
        time.sleep(0.2)  # the reader is waiting before the writer opens: it must not read "ended"
        with open(fifo, "w") as handle:
            handle.write("apiVersion: v1\r\n")

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert files.read_text(str(fifo), RULE, wait=10) == "apiVersion: v1\n"
    finally:
        writer.join()


def test_a_fifo_nobody_writes_to_ends_at_its_wait(tmp_path):
    fifo = tmp_path / "kubeconfig"
    os.mkfifo(fifo)
    with pytest.raises(files.Unreadable, match=r"is a pipe that did not end within 0.2s"):
        files.read_bytes(str(fifo), RULE, wait=0.2)


def test_a_remembered_fifo_is_read_once(tmp_path):
    fifo = tmp_path / "kubeconfig"
    os.mkfifo(fifo)
    rule = files.FileRule("a kubeconfig file", 1 << 20, "the most", pipes=files.READ, remember=True)
    writer = threading.Thread(target=lambda: fifo.write_text("once"))
    writer.start()
    try:
        assert files.read_bytes(str(fifo), rule, wait=10) == b"once"
        assert files.read_bytes(str(fifo), rule, wait=0.1) == b"once"  # no writer now: the content kept
    finally:
        writer.join()
        files._PIPES.pop(str(fifo), None)


@pytest.mark.parametrize(("path", "kind"), [("/dev/zero", "a character device"), ("/dev/null", "a character device"),
                                            ("/", "a directory")])
def test_devices_and_directories_are_refused(path, kind):
    with pytest.raises(files.Unreadable, match=f"is {kind}, not a test file"):
        files.read_bytes(path, RULE)


def test_a_file_bigger_than_the_limit_is_refused_without_reading_it(tmp_path):
    big = tmp_path / "big"
    with open(big, "wb") as handle:
        handle.truncate(1 << 40)  # sparse: 1 TiB, which a read would take hours on
    with pytest.raises(files.Unreadable, match=r"holds more than 1 MiB, the most a test reads \(set NOTHING\)"):
        files.read_bytes(str(big), RULE)
    small = tmp_path / "small"
    small.write_bytes(b"x" * (1 << 20))
    assert len(files.read_bytes(str(small), RULE)) == 1 << 20


def test_a_missing_file_is_the_os_error():
    with pytest.raises(FileNotFoundError):
        files.read_bytes("/nonexistent/file", RULE)


def test_read_json_is_bounded(tmp_path):
    path = tmp_path / "journal.json"
    path.write_text("[" * 2000 + "]" * 2000)
    with pytest.raises(bounded.TooDeep):
        files.read_json(path)


# --- The settings table ---------------------------------------------------------------------------

def test_every_setting_named_in_the_package_is_a_row():
    named = set()
    for path in (ROOT / "kubectl_kvdtype").rglob("*.py"):
        named |= set(re.findall(r"KUBECTL_KVDTYPE_[A-Z_]*[A-Z]", path.read_text(encoding="utf-8")))
    rows = {setting.name for setting in kvsettings.SETTINGS}
    assert named <= rows, f"named in the package but not in SETTINGS: {sorted(named - rows)}"
    assert rows <= named
    assert all(setting.help and setting.audience in (kvsettings.USER, kvsettings.TEST)
               for setting in kvsettings.SETTINGS)


def _table_rows(text: str) -> list[tuple[str, ...]]:
    return [tuple(cell.strip() for cell in line.strip("|").split("|"))
            for line in text.splitlines() if line.startswith("| `KUBECTL_KVDTYPE_")]


def test_the_reference_lists_the_user_settings_as_the_table_says():
    reference = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    rows = _table_rows(reference.split("### Environment settings", 1)[1].split("\n#", 1)[0])
    assert rows == [(f"`{s.name}`", s.help, s.takes, _default(s)) for s in kvsettings.SETTINGS
                    if s.audience == kvsettings.USER]


def test_the_development_guide_lists_the_test_settings():
    guide = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    rows = _table_rows(guide.split("### Test-only settings", 1)[1].split("\n#", 1)[0])
    assert rows == [(f"`{s.name}`", s.help, s.takes, _default(s)) for s in kvsettings.SETTINGS
                    if s.audience == kvsettings.TEST]


def _default(setting: kvsettings.Setting) -> str:
    return setting.default_text


@pytest.mark.parametrize(("name", "text"), [
    ("KUBECTL_KVDTYPE_MAX_FILE_MB", "99999999999999"), ("KUBECTL_KVDTYPE_MAX_FILE_MB", "\u00b2"),
    ("KUBECTL_KVDTYPE_MAX_FILE_MB", "\u0661\u0662"), ("KUBECTL_KVDTYPE_MAX_FILE_MB", "0"),
    ("KUBECTL_KVDTYPE_MAX_FILE_MB", "-1"), ("KUBECTL_KVDTYPE_MAX_PAGES", "1e3"),
    ("KUBECTL_KVDTYPE_MAX_PAGES", "9" * 30), ("KUBECTL_KVDTYPE_COMPLETION_TIMEOUT", "inf"),
    ("KUBECTL_KVDTYPE_COMPLETION_TIMEOUT", "nan"), ("KUBECTL_KVDTYPE_COMPLETION_TIMEOUT", "1e400"),
    ("KUBECTL_KVDTYPE_PROGRESS_DELAY", "-1"), ("KUBECTL_KVDTYPE_PROGRESS_DELAY", "\u0661"),
    ("KUBECTL_KVDTYPE_DEBUG", "maybe"),
])
def test_a_bad_setting_is_one_sentence_naming_it(name, text):
    with pytest.raises(UsageError) as raised:
        kvsettings.check({name: text})
    assert raised.value.message.startswith(f"{name} must be ") and "\n" not in raised.value.message
    assert kvsettings.value_or_default({name: text}, kvsettings.named(name)) == kvsettings.named(name).default


def test_settings_are_typed():
    environ = {"KUBECTL_KVDTYPE_MAX_FILE_MB": " 3 ", "KUBECTL_KVDTYPE_DEBUG": "TRUE",
               "KUBECTL_KVDTYPE_COMPLETION_TIMEOUT": "0.5", "KUBECTL_KVDTYPE_MAX_PAGES": ""}
    kvsettings.check(environ)
    assert kvsettings.value(environ, kvsettings.MAX_FILE_MB) == 3
    assert kvsettings.value(environ, kvsettings.DEBUG) is True
    assert kvsettings.value(environ, kvsettings.COMPLETION_TIMEOUT) == 0.5
    assert kvsettings.value(environ, kvsettings.MAX_PAGES) == 1000


def test_a_long_bad_setting_is_cut():
    with pytest.raises(UsageError) as raised:
        kvsettings.check({"KUBECTL_KVDTYPE_MAX_PAGES": "x" * 100_000})
    assert len(raised.value.message) < 400 and "(100000 characters)" in raised.value.message


# --- kubectl's durations ------------------------------------------------------------------------

#: What the real kubectl 1.37 does with --request-timeout=X against a server (verified by hand: a
#: value it refuses ends in "Invalid timeout value"): seconds, or None for no limit.
KUBECTL_ACCEPTS = [("1h", 3600.0), ("+5s", 5.0), (".5s", 0.5), ("5.s", 5.0), ("5us", 5e-6), ("5\u00b5s", 5e-6),
                   ("5\u03bcs", 5e-6), ("5ns", 5e-9), ("-0s", None), ("5", 5.0), ("+5", 5.0), ("05", 5.0),
                   ("-0", None), ("0", None), ("-5s", None), ("00005s", 5.0), ("1m1.5s", 61.5), ("1h0m", 3600.0),
                   ("0.0000000001ns", None), ("", 30.0)]
KUBECTL_REFUSES = ["5S", "1d", "1e3s", ".s", ".", "5m3", "1h-5m", "1_0s", "0x10", "-1", "-5", "2562048h"]


@pytest.mark.parametrize(("text", "seconds"), KUBECTL_ACCEPTS)
def test_request_timeout_takes_what_kubectl_takes(text, seconds):
    from kubectl_kvdtype._commands.flags import _request_timeout

    assert _request_timeout(text) == (pytest.approx(seconds) if seconds else seconds)


@pytest.mark.parametrize("text", KUBECTL_REFUSES)
def test_request_timeout_refuses_what_kubectl_refuses(text):
    from kubectl_kvdtype._commands.flags import _request_timeout

    with pytest.raises(argparse.ArgumentTypeError):
        _request_timeout(text)


def test_wait_takes_go_durations_but_no_negative_one():
    from kubectl_kvdtype._commands.flags import parse_duration

    assert parse_duration("1h30m") == 5400 and parse_duration(".5s") == 0.5 and parse_duration("250us") == 0.00025
    with pytest.raises(argparse.ArgumentTypeError, match="negative"):
        parse_duration("-5s")


# --- Cutting long values --------------------------------------------------------------------------

def test_cut():
    assert cut("short") == "short"
    assert cut("x" * 1000) == "x" * 120 + "... (1000 characters)"
    message = "invalid choice: '" + "y" * 100_000 + "' (choose from 'table', 'json')"
    shortened = cut_words(message)
    assert len(shortened) < 300 and shortened.endswith("(choose from 'table', 'json')")
    assert cut_words("a /" + "p" * 300 + " path", limit=4096).count("p") == 300 + 1  # a path stays whole


def test_a_100kb_flag_value_is_cut_in_the_usage_error():
    from _support import in_process

    status, _, err = in_process(["check", "-o", "z" * 100_000], environ={})
    assert status == 2 and len(err) < 600 and re.search(r"\(10000\d characters\)", err), err[:300]


def test_the_yaml_report_writes_a_lone_surrogate_as_its_escape():
    import yaml

    from kubectl_kvdtype._output.documents import _plain_dumper

    text = yaml.dump({"dtype": "bf\ud800x"}, Dumper=_plain_dumper(yaml))
    assert yaml.safe_load(text) == {"dtype": "bf\\ud800x"}


def test_the_shipped_engine_tables_pass_the_whole_validation():
    from kubectl_kvdtype._engines import parsers as _parsers
    from kubectl_kvdtype._engines import rewrites as _rewrites
    from kubectl_kvdtype._engines import tables

    shipped = shipped_document()
    checked = tables.validate(shipped, _rewrites.REWRITES, _parsers._build_all)
    assert set(checked["tables"]["vLLM"]) == set(shipped["tables"]["vLLM"])


def _extra(version: str = "0.29.0") -> dict:
    shipped = shipped_document()
    return {"versions": {"vLLM": [version]}, "same": {},
            "tables": {"vLLM": {version: json.loads(shipped["tables"]["vLLM"]["0.29.0"])}}}


def _without(table: dict, key: str) -> dict:
    return {k: v for k, v in table.items() if k != key}


#: Malformed tables that pass a shape check of versions and tables, each with the field named.
MALFORMED = [
    (lambda t: _without(t, "allow_abbrev"), "tables.vLLM.0.29.0.allow_abbrev: missing"),
    (lambda t: {**t, "allow_abbrev": "yes"}, "tables.vLLM.0.29.0.allow_abbrev: 'yes' is not true or false"),
    (lambda t: {**t, "actions": {}}, "tables.vLLM.0.29.0.actions: a mapping, not a list"),
    (lambda t: {**t, "actions": [{**t["actions"][0], "options": "-h"}] + t["actions"][1:]},
     "tables.vLLM.0.29.0.actions[0].options: text, not a list"),
    (lambda t: {**t, "actions": [{**t["actions"][0], "options": [3]}] + t["actions"][1:]},
     "tables.vLLM.0.29.0.actions[0].options[0]: a number, not text"),
    (lambda t: {**t, "actions": [{**a, "nargs": "many"} for a in t["actions"][:1]] + t["actions"][1:]},
     "tables.vLLM.0.29.0.actions[0].nargs: 'many' is no argparse nargs"),
    (lambda t: {**t, "actions": [a for a in t["actions"] if a["dest"] != "kv_cache_dtype"]},
     "tables.vLLM.0.29.0.actions: no option --kv-cache-dtype"),
    (lambda t: {**t, "entry_points": {"api_server": t["entry_points"]["api_server"]}},
     "tables.vLLM.0.29.0.entry_points: no entry point 'vllm serve'"),
    (lambda t: {**t, "entry_points": {**t["entry_points"], "api_server": {"parser": "own", "steps": ["rm -rf"]}}},
     "tables.vLLM.0.29.0.entry_points.api_server.steps[0]: 'rm -rf' is no argv step"),
    (lambda t: {**t, "actions": t["actions"] + [{"action": "store", "dest": "x", "options": ["--kv-cache-dtype"]}]},
     "tables.vLLM.0.29.0: its parser cannot be built (ArgumentError"),
    (lambda t: _without(t, "prog"), "tables.vLLM.0.29.0.prog: missing"),
]


@pytest.mark.parametrize(("change", "said"), MALFORMED)
def test_a_malformed_table_is_one_problem_naming_its_field(change, said):
    from kubectl_kvdtype._engines import parsers as _parsers
    from kubectl_kvdtype._engines import rewrites as _rewrites
    from kubectl_kvdtype._engines import tables

    data = _extra()
    data["tables"]["vLLM"]["0.29.0"] = change(data["tables"]["vLLM"]["0.29.0"])
    with pytest.raises(tables.TableError) as raised:
        tables.validate(data, _rewrites.REWRITES, _parsers._build_all)
    assert str(raised.value).startswith(said), str(raised.value)


@pytest.mark.parametrize(("data", "said"), [
    ({"versions": {"vLLM": ["0.29.0"]}}, "tables: missing"),
    ({"versions": {"TensorRT": ["1.0"]}, "tables": {}}, "versions.TensorRT: 'TensorRT' is no engine"),
    ({"versions": {"vLLM": ["latest"]}, "tables": {"vLLM": {}}}, "versions.vLLM[0]: 'latest' is not an engine version"),
    ({"versions": {"vLLM": ["0.29.0"]}, "tables": {"vLLM": {}}}, "tables.vLLM.0.29.0: missing"),
    ({"versions": {"vLLM": ["0.29.0"]}, "tables": {"vLLM": {"0.29.0": "[" * 500}}},
     "tables.vLLM.0.29.0: not a table (it is nested more than 100 levels deep"),
    ([], "a list, not a mapping"),
])
def test_a_malformed_file_is_one_problem_naming_its_field(data, said):
    from kubectl_kvdtype._engines import parsers as _parsers
    from kubectl_kvdtype._engines import rewrites as _rewrites
    from kubectl_kvdtype._engines import tables

    with pytest.raises(tables.TableError) as raised:
        tables.validate(data, _rewrites.REWRITES, _parsers._build_all)
    assert str(raised.value).startswith(said), str(raised.value)


def test_the_real_kubeconfig_of_a_fifo_path_is_a_kubeconfig_file(tmp_path):
    from kubectl_kvdtype._sources import connection

    fifo = tmp_path / "kc"
    os.mkfifo(fifo)
    assert connection.kubeconfig_paths(str(fifo), {}) == [str(fifo)]
    assert connection.kubeconfig_paths(None, {"KUBECONFIG": str(fifo)}) == [str(fifo)]
    assert Path(fifo).exists()


# --- pipes read to their end (files.read_pipes: a FIFO given as a file, an exec plugin's output) ---

def _pipes(count: int) -> tuple[list[int], list[int]]:
    pairs = [os.pipe() for _ in range(count)]
    return [r for r, _ in pairs], [w for _, w in pairs]


def test_pipes_are_read_at_once_so_a_writer_filling_one_never_waits_on_another():
    """The writer fills the second pipe far past what a pipe buffers before it writes the first:
    read one after the other, the reader would wait on the first while the writer waits on it."""
    (first, second), (to_first, to_second) = _pipes(2)
    flood = b"e" * (1 << 18)

    def write() -> None:
        with os.fdopen(to_second, "wb") as handle:
            handle.write(flood)
        with os.fdopen(to_first, "wb") as handle:
            handle.write(b"done")

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert files.read_pipes([first, second], 1 << 20, time.monotonic() + 30) == [b"done", flood]
    finally:
        writer.join()
        os.close(first)
        os.close(second)


def test_pipes_holding_more_than_the_limit_together_are_refused_and_a_deadline_holds():
    (first, second), (to_first, to_second) = _pipes(2)
    try:
        os.write(to_first, b"a" * 600)
        os.write(to_second, b"b" * 600)
        with pytest.raises(files.PipeOverflow):
            files.read_pipes([first, second], 1000, None)  # each under the limit, together over it
        with pytest.raises(files.PipeTimeout):  # nobody closes them: the deadline ends the read
            files.read_pipes([first, second], 1 << 20, time.monotonic() + 0.05)
    finally:
        for fd in (first, second, to_first, to_second):
            os.close(fd)
