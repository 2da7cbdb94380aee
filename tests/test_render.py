"""Fast tier: ``_output``'s writers turn a Report into tables, wide tables, JSON and YAML."""

from __future__ import annotations

import json

import yaml

from kubectl_kvdtype._kits.report import Column, ObjectRef, Report
from kubectl_kvdtype._output.documents import PRETTY_JSON_ENTRIES, to_json
from kubectl_kvdtype._output.render import render
from kubectl_kvdtype._output.tables import table

RED, RESET = "\033[31m", "\033[0m"


def _report() -> Report:
    report = Report(
        "CheckReport",
        columns=[Column("NAMESPACE", "namespace", namespace=True), Column("NAME", "name"),
                 Column("DTYPE", "dtype"), Column("VERDICT", "verdict", status=True),
                 Column("POOL", "pool", wide=True)],
        items=[{"namespace": "ml", "name": "llama", "dtype": "bf16", "verdict": "rejected", "pool": "shared"},
               {"namespace": "ml", "name": "qwen", "dtype": "", "verdict": "ok", "pool": "shared"}],
        headline="2 bindings, 1 rejected.",
    )
    report.add("dtype-rejected", ObjectRef("KVCachePoolBinding", "ml", "llama"), "vLLM refuses bf16")
    report.add("dtype-unknown", ObjectRef("KVCachePoolBinding", "ml", "qwen"), "no dtype")
    return report


def _lines(text: str) -> list[str]:
    return text.splitlines()


def test_table_has_kubectl_headers_three_spaces_apart_and_none_for_empty_cells():
    out = render(_report(), "table")
    items = _lines(out.split("\n\n")[0])
    assert items[0].split() == ["NAMESPACE", "NAME", "DTYPE", "VERDICT"]  # POOL is wide only
    assert items[2].split() == ["ml", "qwen", "<none>", "ok"]
    assert all(line == line.rstrip() for line in _lines(out))
    assert "dtype-rejected" in out and out.rstrip().endswith("2 bindings, 1 rejected.")


def test_columns_line_up():
    lines = _lines(render(_report(), "table").split("\n\n")[0])
    assert len(lines) == 3, lines
    assert lines[0].index("DTYPE") == lines[1].index("bf16") == lines[2].index("<none>"), lines


def test_wide_adds_the_wide_columns():
    header = _lines(render(_report(), "wide"))[0].split()
    assert header == ["NAMESPACE", "NAME", "DTYPE", "VERDICT", "POOL"]


def test_one_namespace_drops_the_namespace_column():
    header = _lines(render(_report(), "table", all_namespaces=False))[0].split()
    assert header == ["NAME", "DTYPE", "VERDICT"]


def test_no_headers_drops_headers_and_headline_but_keeps_every_row():
    out = render(_report(), "table", no_headers=True)
    assert "NAMESPACE" not in out and "SEVERITY" not in out and "2 bindings" not in out
    assert [line.split()[1] for line in _lines(out.split("\n\n")[0])] == ["llama", "qwen"]
    assert len([line for line in _lines(out) if line.strip()]) == 4  # 2 items + 2 findings


def test_colour_paints_judgement_words_only_when_asked():
    plain = render(_report(), "table")
    coloured = render(_report(), "table", color=True)
    assert "\033[" not in plain
    assert f"{RED}rejected{RESET}" in coloured and f"{RED}error{RESET}" in coloured
    assert "\033[33mwarning" in coloured and "\033[32mok" in coloured
    assert f"{RED}bf16" not in coloured  # DTYPE is not a status column


def test_json_is_the_report_document():
    report = _report()
    assert json.loads(render(report, "json")) == report.to_dict()
    assert render(report, "json").startswith('{\n  "kind": "CheckReport"')


def test_yaml_is_the_same_document():
    report = _report()
    assert yaml.safe_load(render(report, "yaml")) == report.to_dict()


def test_yaml_writes_shared_values_out_never_as_anchors():
    shared = [{"field": "command", "index": 3, "value": "bf16"}]
    report = Report(kind="VerifyReport")
    report.items = [{"name": "a", "occurrences": shared}, {"name": "b", "occurrences": shared}]
    text = render(report, "yaml")
    assert "&" not in text and "*" not in text
    assert yaml.safe_load(text) == json.loads(render(report, "json"))


def test_yaml_prints_manifests_as_a_stream_when_a_report_has_them():
    report = _report()
    report.manifests = [{"kind": "KVCachePoolBinding", "metadata": {"name": "a"}},
                        {"kind": "KVCachePoolBinding", "metadata": {"name": "b"}}]
    assert list(yaml.safe_load_all(render(report, "yaml"))) == report.manifests


def test_text_reports_print_verbatim_whatever_the_output():
    report = Report("Completion", text="complete -F _kvdtype kubectl-kvdtype\n")
    assert {render(report, output) for output in ("table", "json", "yaml")} == {report.text}


def test_large_json_is_one_entry_per_line_and_parses_the_same():
    items = [{"name": f"p{i}", "n": i} for i in range(PRETTY_JSON_ENTRIES + 1)]
    document = {"kind": "VerifyReport", "items": items, "findings": [], "summary": {"pods": len(items)}}
    text = to_json(document)
    assert json.loads(text) == document
    assert len(text.splitlines()) == len(items) + 7  # {, kind, items: [, the items, ], findings, summary, }
    assert text.startswith('{\n  "kind": "VerifyReport",\n  "items": [\n    {"name": "p0", "n": 0},\n    {"name": "p1"')
    last = len(items) - 1
    assert text.endswith(f'"n": {last}}}\n  ],\n  "findings": [],\n  "summary": {{"pods": {last + 1}}}\n}}\n')
    small = {"kind": "VerifyReport", "items": items[:2]}
    assert json.loads(to_json(small)) == small and '    "name": "p0"' in to_json(small)


def test_cells_are_printed_as_given_never_as_numbers():
    # disable_numparse: "1e3" or "007" stay as written (a version, a dtype), and align left.
    out = table(["VERSION", "COUNT"], [["0.10", "007"], ["1e3", "12"]])
    assert [line.split() for line in out.splitlines()] == [["VERSION", "COUNT"], ["0.10", "007"], ["1e3", "12"]]
    lines = out.splitlines()
    assert lines[1].index("007") == lines[2].index("12") == lines[0].index("COUNT")
