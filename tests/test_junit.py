"""``-o junit`` and ``--fail-on``: the JUnit XML CI systems read, checked against the JSON report.

Fast tier: reports rendered in process (``_junit``), every text made safe for XML, and the
subcommands run in process on the bundled examples (``-f``). End to end: the real kubectl runs the
plugin against the fake API server and on the examples; each JUnit document is parsed with
``xml.etree`` and compared, testcase by testcase and failure by failure, with the JSON report of
the same run.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter
from typing import Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _support import EXAMPLES, JUDGING, SETTING, SYSTEM, in_process, kvdtype, seed
from kubectl_kvdtype._kits.report import ERROR, WARNING, ObjectRef, Report
from kubectl_kvdtype._output.junit import safe, to_junit

#: What each subcommand is run on: -A on a cluster; offline, the examples in scope.
SCOPE = {"check": ["-A"], "find-flags": ["-A"], "verify": ["-A"], "preflight": ["-A"]}


# --- Reading a JUnit document and a JSON report the same way --------------------------------------

def parse(text: str) -> ET.Element:
    """The document, checked for the shape CI systems read: one suite under a testsuites root."""
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n')
    assert text.isascii()  # non-ASCII goes as character references: any stdout encoding carries it
    root = ET.fromstring(text)
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1
    suite = suites[0]
    assert {k: root.get(k) for k in ("tests", "failures", "errors")} == \
        {k: suite.get(k) for k in ("tests", "failures", "errors")}
    cases = suite.findall("testcase")
    assert int(suite.get("tests")) == len(cases)
    assert int(suite.get("failures")) == sum(1 for c in cases if c.find("failure") is not None)
    assert suite.get("errors") == "0"
    return suite


def key(obj: dict) -> tuple[str, str]:
    """A JSON finding's object as its testcase names it: (classname, name)."""
    namespace = obj.get("namespace")
    return (f"{namespace}.{obj['kind']}" if namespace else obj["kind"], obj["name"])


def cases_of(suite: ET.Element) -> list[tuple[str, str]]:
    return [(c.get("classname"), c.get("name")) for c in suite.findall("testcase")]


def junit_failures(suite: ET.Element) -> Counter:
    """(testcase, code, message) of every <failure>."""
    return Counter((c.get("classname"), c.get("name"), f.get("type"), f.get("message"))
                   for c in suite.findall("testcase") for f in c.findall("failure"))


def json_failures(document: dict, fail_on: str = ERROR) -> Counter:
    """The same, from the JSON report: its findings that fail the run."""
    failing = (ERROR, WARNING) if fail_on == WARNING else (ERROR,)
    return Counter((*key(f["object"]), f["code"], f["message"]) for f in document["findings"]
                   if f["severity"] in failing)


def property_values(suite: ET.Element) -> dict[str, str]:
    return {p.get("name"): p.get("value") for p in suite.find("properties").findall("property")}


def assert_matches_json(suite: ET.Element, document: dict, command: str, fail_on: str = ERROR) -> None:
    """The counts of a JUnit document are those of the JSON report of the same run."""
    cases = cases_of(suite)
    assert len(cases) == len(set(cases))  # one testcase per object
    assert suite.get("name") == f"kubectl-kvdtype {command}"
    assert int(suite.get("tests")) == document["summary"]["judged"]
    failures = json_failures(document, fail_on)
    assert junit_failures(suite) == failures
    failed_cases = {(c.get("classname"), c.get("name")) for c in suite.findall("testcase")
                    if c.find("failure") is not None}
    assert failed_cases == {(classname, name) for classname, name, _, _ in failures}
    assert int(suite.get("failures")) == len(failed_cases)
    counts = document["summary"]["findings"]
    assert property_values(suite) == {
        "report": document["kind"], "fail-on": fail_on, "findings.errors": str(counts["errors"]),
        "findings.warnings": str(counts["warnings"]), "findings.info": str(counts["info"]),
        "findings.ignored": str(counts["ignored"]),
        **({"verdict": document["summary"]["verdict"]} if command == "preflight" else {})}
    # Every finding is on its object's testcase: a failure, or a line of its system-out.
    out = {(c.get("classname"), c.get("name")): (c.findtext("system-out") or "") for c in suite.findall("testcase")}
    for finding in document["findings"]:
        assert key(finding["object"]) in out
        if (*key(finding["object"]), finding["code"], finding["message"]) not in failures:
            assert f"{finding['severity']} {finding['code']}: {finding['message']}" in out[key(finding["object"])]


def assert_judged_objects(command: str, cases: list[tuple[str, str]], document: dict) -> None:
    """What each subcommand's testcases are (docs/reference.md), rebuilt from its JSON report."""
    named = {key(f["object"]) for f in document["findings"]}
    if command == "check":  # each Binding and each consumer
        bindings = {key({"kind": "KVCachePoolBinding", **item}) for item in document["items"]}
        consumers = {key(c) for item in document["items"] for c in item["consumers"]}
        assert set(cases) == bindings | consumers | named
        assert len(bindings) == document["summary"]["bindings"]
    elif command == "verify":  # each replica and injected Pod judged, and what findings name besides
        pods = {key({"kind": "Pod", **item}) for item in document["items"]}
        assert set(cases) == pods | named
        assert len(pods) == document["summary"]["pods"]
    elif command == "find-flags":  # every pool-attached deployment, injected Pod and opted-in template
        examined = document["summary"]["examined"]
        assert named <= set(cases)
        assert len(cases) == sum(examined.values()) + len(named - {key(f["object"]) for f in document["findings"]
                                                                   if f["code"] in ("role-flag", "pod-flag")})


# --- Fast tier: a report rendered --------------------------------------------------------------

BINDING = ObjectRef("KVCachePoolBinding", "team-a", "legacy")
DEPLOYMENT = ObjectRef("ModelDeployment", "team-a", "qwen")
POD = ObjectRef("Pod", "team-b", "worker-0")
POOL = ObjectRef("KVCachePool", None, "shared")


def _sample(fail_on: str = ERROR) -> Report:
    report = Report("CheckReport", judged=[BINDING, DEPLOYMENT, POD], headline="3 objects judged.",
                    warnings=["cannot read the Setting: forbidden"], fail_on=fail_on)
    report.add("dtype-rejected", BINDING, "vLLM rejects bf16.")
    report.add("dtype-rejected", BINDING, "SGLang rejects bf16.")
    report.add("dtype-unknown", DEPLOYMENT, "not in the table.")
    report.add("binding-unused", POD, "nothing consumes it.")
    report.add("duplicate-object", POOL, "read twice.")  # an object judged by nobody: a testcase too
    return report


def test_one_testcase_per_object_and_a_failure_per_error_finding():
    suite = parse(to_junit(_sample(), "check"))
    assert suite.get("name") == "kubectl-kvdtype check"
    assert cases_of(suite) == [("team-a.KVCachePoolBinding", "legacy"), ("team-a.ModelDeployment", "qwen"),
                                ("team-b.Pod", "worker-0"), ("KVCachePool", "shared")]
    binding, deployment, pod, pool = suite.findall("testcase")
    assert [(f.get("type"), f.get("message")) for f in binding.findall("failure")] == [
        ("dtype-rejected", "vLLM rejects bf16."), ("dtype-rejected", "SGLang rejects bf16.")]
    assert "KVCachePoolBinding team-a/legacy" in binding.find("failure").text
    assert "an engine consuming the Binding rejects its dtype spelling" in binding.find("failure").text
    # Warnings and info do not fail; they are in the testcase's output, so CI shows them.
    assert deployment.find("failure") is None
    assert deployment.findtext("system-out") == "warning dtype-unknown: not in the table."
    assert pod.findtext("system-out") == "info binding-unused: nothing consumes it."
    assert pool.find("failure") is None and pool.findtext("system-out") == "warning duplicate-object: read twice."
    assert (suite.get("tests"), suite.get("failures")) == ("4", "1")
    assert suite.findtext("system-out") == "3 objects judged."
    assert suite.findtext("system-err") == "cannot read the Setting: forbidden"
    assert property_values(suite) == {"report": "CheckReport", "fail-on": "error", "findings.errors": "2",
                                      "findings.warnings": "2", "findings.info": "1", "findings.ignored": "0"}


def test_fail_on_warning_makes_warnings_failures_too():
    suite = parse(to_junit(_sample(WARNING), "check"))
    failures = junit_failures(suite)
    assert failures[("team-a.ModelDeployment", "qwen", "dtype-unknown", "not in the table.")] == 1
    assert failures[("KVCachePool", "shared", "duplicate-object", "read twice.")] == 1
    assert sum(failures.values()) == 4 and suite.get("failures") == "3"
    assert suite.findall("testcase")[2].find("failure") is None  # info never fails
    assert property_values(suite)["fail-on"] == "warning"


def test_objects_with_no_finding_are_passing_testcases_and_an_empty_report_is_an_empty_suite():
    report = Report("VerifyReport", judged=[POD, ObjectRef("Pod", "team-b", "worker-1")])
    suite = parse(to_junit(report, "verify"))
    assert [list(case) for case in suite.findall("testcase")] == [[], []]
    assert (suite.get("tests"), suite.get("failures")) == ("2", "0")
    empty = parse(to_junit(Report("FindFlagsReport", judged=[]), "find-flags"))
    assert (empty.get("tests"), empty.findall("testcase")) == ("0", [])


def test_the_rule_is_the_exit_status_rule():
    for fail_on in (ERROR, WARNING):
        report = _sample(fail_on)
        suite = parse(to_junit(report, "check"))
        assert sum(junit_failures(suite).values()) == len(report.failing())
        assert bool(report.failing()) == (report.exit_status() != 0)


# --- Fast tier: nothing in a name or a message can break the XML ----------------------------------

HOSTILE = "tëam-ü 中文 🚀 <b>&amp; \"q\" 'a' ]]> \x00\x07\x1b\x0b\x0c\x7f \ud800 \ufffe end"


def test_control_characters_surrogates_and_markup_cannot_break_the_document():
    ref = ObjectRef("Pod", "ns-" + HOSTILE, "pod-" + HOSTILE)
    report = Report("VerifyReport", judged=[ref], headline=HOSTILE, warnings=[HOSTILE])
    report.add("pod-dtype-mismatch", ref, "message " + HOSTILE)
    report.add("dtype-unknown", ref, "warned " + HOSTILE)
    text = to_junit(report, "verify")
    suite = parse(text)
    (case,) = suite.findall("testcase")
    shown = safe(HOSTILE)
    assert case.get("name") == "pod-" + shown
    assert case.get("classname") == "ns-" + shown + ".Pod"
    assert case.find("failure").get("message") == "message " + shown
    assert ("warned " + shown) in case.findtext("system-out")
    # What XML can carry is kept exactly; what it cannot is written as a visible escape.
    assert "tëam-ü 中文 🚀 <b>&amp; \"q\" 'a' ]]>" in shown and "\x7f" in shown
    assert "\\x00\\x07\\x1b\\x0b\\x0c" in shown and "\\ud800" in shown and "\\ufffe" in shown
    assert "&#235;" in text and "&#128640;" in text  # ë and the rocket, as character references


@settings(max_examples=200, deadline=None)
@given(namespace=st.one_of(st.none(), st.text()), name=st.text(), message=st.text(), code=st.sampled_from(
    ["dtype-rejected", "dtype-unknown", "binding-unused"]))
def test_any_text_gives_a_well_formed_document_that_keeps_it(namespace, name, message, code):
    ref = ObjectRef("Pod", namespace, name)
    report = Report("VerifyReport", judged=[ref])
    report.add(code, ref, message)
    suite = parse(to_junit(report, "verify"))
    (case,) = suite.findall("testcase")
    assert case.get("name") == safe(name)
    failure = case.find("failure")
    assert (failure.get("message") if failure is not None else None) == (safe(message) if code == "dtype-rejected"
                                                                         else None)


# --- Fast tier: the subcommands, in process, on the bundled examples -------------------------------

def _in_process(*args: str) -> tuple[int, str]:
    status, out, err = in_process(list(args), environ={})
    assert out, err
    return status, out


@pytest.mark.parametrize("command", JUDGING)
def test_each_subcommand_junit_matches_its_json_on_the_examples(command):
    status, text = _in_process(command, "-f", str(EXAMPLES), "-o", "junit")
    json_status, out = _in_process(command, "-f", str(EXAMPLES), "-o", "json")
    assert status == json_status == 1  # the format does not change the exit status
    document = json.loads(out)
    suite = parse(text)
    assert_matches_json(suite, document, command)
    assert_judged_objects(command, cases_of(suite), document)
    assert sum(junit_failures(suite).values()) == document["summary"]["findings"]["errors"]


@pytest.mark.parametrize("command", JUDGING)
def test_fail_on_warning_in_junit_matches_json(command):
    status, text = _in_process(command, "-f", str(EXAMPLES), "-o", "junit", "--fail-on", "warning")
    _, out = _in_process(command, "-f", str(EXAMPLES), "-o", "json", "--fail-on", "warning")
    document = json.loads(out)
    assert_matches_json(parse(text), document, command, fail_on=WARNING)
    counts = document["summary"]["findings"]
    assert sum(junit_failures(parse(text)).values()) == counts["errors"] + counts["warnings"]


def test_preflight_judges_what_check_and_find_flags_judge():
    suites = {c: parse(_in_process(c, "-f", str(EXAMPLES), "-o", "junit")[1]) for c in ("check", "find-flags",
                                                                                        "preflight")}
    union = set(cases_of(suites["check"])) | set(cases_of(suites["find-flags"]))
    preflight = set(cases_of(suites["preflight"]))
    assert union <= preflight
    _, out = _in_process("preflight", "-f", str(EXAMPLES), "-o", "json")
    extra = {key(f["object"]) for f in json.loads(out)["findings"]} - union
    assert preflight == union | extra


def test_ignored_findings_never_fail_and_are_counted():
    status, text = _in_process("check", "-f", str(EXAMPLES), "-o", "junit", "--ignore", "dtype-rejected",
                               "--ignore", "binding-missing")
    suite = parse(text)
    assert status == 0 and suite.get("failures") == "0"
    assert property_values(suite)["findings.ignored"] == "5"  # turbo's turboquant_4bit is rejected too (issue 27)
    status, text = _in_process("check", "-f", str(EXAMPLES), "-o", "junit", "--ignore", "dtype-rejected",
                               "--ignore", "binding-missing", "--fail-on", "warning")
    assert status == 1 and {t for _, _, t, _ in junit_failures(parse(text))} == {"dtype-auto", "engine-unknown"}


# --- Fast tier: --fail-on and -o junit on the command line -----------------------------------------

@pytest.mark.parametrize("command", JUDGING)
def test_an_invalid_fail_on_is_a_usage_error(command):
    status, out, err = in_process([command, "-f", str(EXAMPLES), "--fail-on", "info"], environ={})
    assert (status, out) == (2, "")
    assert "--fail-on: invalid choice: 'info' (choose from 'error', 'warning')" in err


@pytest.mark.parametrize("args", [["escape", "status", "--fail-on", "warning"], ["completion", "bash", "--fail-on",
                                                                                  "error"],
                                  ["escape", "status", "-o", "junit"], ["completion", "bash", "-o", "junit"]])
def test_subcommands_that_do_not_judge_refuse_fail_on_and_junit(args):
    status, out, err = in_process([*args, "-f", str(EXAMPLES)], environ={})
    assert (status, out) == (2, "")
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1


# --- End to end: real kubectl, the fake API server and the examples --------------------------------

def _run(env: dict, command: str, source: list[str], *extra: str) -> tuple[int, str]:
    result = kvdtype(env, command, *source, *extra)
    assert result.stdout, result.stderr
    return result.returncode, result.stdout


@pytest.mark.e2e
@pytest.mark.parametrize("where", ["cluster", "examples"])
@pytest.mark.parametrize("command", JUDGING)
def test_junit_through_kubectl_matches_the_json_of_the_same_run(cluster, command, where):
    source = SCOPE[command] if where == "cluster" else ["-f", str(EXAMPLES)]
    status, text = _run(cluster, command, source, "-o", "junit")
    json_status, out = _run(cluster, command, source, "-o", "json")
    assert status == json_status == 1
    document = json.loads(out)
    suite = parse(text)
    assert_matches_json(suite, document, command)
    assert_judged_objects(command, cases_of(suite), document)
    assert int(suite.get("tests")) > int(suite.get("failures")) > 0  # passing and failing testcases both
    status, text = _run(cluster, command, source, "-o", "junit", "--fail-on", "warning", "--exit-zero")
    _, out = _run(cluster, command, source, "-o", "json", "--fail-on", "warning")
    assert status == 0
    assert_matches_json(parse(text), json.loads(out), command, fail_on=WARNING)


def _binding(namespace: str, name: str, dtype: Optional[str]) -> dict:
    domain = {"name": f"{namespace}-{name}", "blockSize": 64, **({"dtype": dtype} if dtype else {})}
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"poolRef": {"name": "shared-dram"}, "domain": domain}}


def _deployment(namespace: str, name: str, binding: Optional[str]) -> dict:
    spec = {"model": {"name": "Qwen/Qwen3-8B"}, "engine": {"name": "vLLM", "version": "0.29.0"},
            "roles": [{"name": "server", "kind": "Server", "replicas": 1,
                       "instanceType": "gpustack-nvidia-h20-linux-amd64"}]}
    if binding:
        spec["kvCache"] = {"poolRef": {"name": binding}, "connector": "Mooncake"}
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def _setting() -> dict:
    return {"apiVersion": "gpustack.ai/v1", "kind": "Setting", "metadata": {"name": SETTING, "namespace": SYSTEM},
            "spec": {"value": "true"}, "status": {"value": "true"}}


def _assert_warning_only_gate(env: dict, command: str, args: list[str], warning: str) -> None:
    """Exit 0 by default, 1 with --fail-on warning (the warning a JUnit failure), 0 with --exit-zero."""
    _, out = _run(env, command, args, "-o", "json")
    document = json.loads(out)
    counts = document["summary"]["findings"]
    assert counts["errors"] == 0 and counts["warnings"] >= 1, document["findings"]
    assert warning in {f["code"] for f in document["findings"] if f["severity"] == WARNING}
    assert kvdtype(env, command, *args).returncode == 0
    strict = kvdtype(env, command, *args, "--fail-on", "warning")
    assert strict.returncode == 1, strict.stderr
    assert kvdtype(env, command, *args, "--fail-on=warning", "--exit-zero").returncode == 0
    status, text = _run(env, command, args, "-o", "junit", "--fail-on", "warning")
    assert status == 1
    suite = parse(text)
    assert warning in {t for _, _, t, _ in junit_failures(suite)}
    status, text = _run(env, command, args, "-o", "junit")
    assert status == 0 and parse(text).get("failures") == "0"


@pytest.mark.e2e
@pytest.mark.parametrize("command, args, warning", [
    ("check", ["-n", "team-w"], "dtype-auto"),
    ("preflight", ["-n", "team-w"], "dtype-auto"),
    ("verify", ["plain", "-n", "team-w"], "deployment-not-attached"),
])
def test_fail_on_warning_turns_a_warning_only_cluster_into_exit_1(fake, kube_env, command, args, warning):
    seed(fake, [_binding("team-w", "old", "auto"), _deployment("team-w", "qwen", "old"),
                _deployment("team-w", "plain", None), _setting()])
    _assert_warning_only_gate(kube_env, command, args, warning)


@pytest.mark.e2e
@pytest.mark.parametrize("command", JUDGING)
def test_fail_on_warning_turns_a_warning_only_dump_into_exit_1(kube_env, tmp_path, command):
    """find-flags has no warning code of its own: an object read twice, differently, is one."""
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps(_binding("team-d", "chat", "bfloat16")))
    second.write_text(json.dumps(_binding("team-d", "chat", "fp8_e4m3")))
    _assert_warning_only_gate(kube_env, command, ["-f", str(first), "-f", str(second)], "duplicate-object")


@pytest.mark.e2e
def test_hostile_names_in_a_dump_still_give_well_formed_junit(kube_env, tmp_path):
    name = "ünïcode-中\u0007\u001b<&>\"]]>"
    dump = tmp_path / "dump.json"
    # JSON escapes carry what YAML cannot: a bell, an escape character, an unpaired surrogate.
    items = [_binding("team-x", name, "bf16"), _deployment("team-x", "md-\ud800", name)]
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    assert dump.read_text().isascii() and "\\ud800" in dump.read_text()
    env = {**kube_env, "PYTHONIOENCODING": "ascii"}  # a stdout that carries ASCII only
    for command in JUDGING:
        status, text = _run(env, command, ["-f", str(dump)], "-o", "junit")
        json_status, out = _run(env, command, ["-f", str(dump)], "-o", "json")
        assert status == json_status
        assert_matches_json_safely(parse(text), json.loads(out), command)
    suite = parse(_run(env, "check", ["-f", str(dump)], "-o", "junit")[1])
    assert safe(name) == "ünïcode-中\\x07\\x1b<&>\"]]>"
    assert set(cases_of(suite)) == {("team-x.KVCachePoolBinding", safe(name)), ("team-x.ModelDeployment", "md-\\ud800")}
    # Both names are ones the API server refuses: each object is an invalid-name failure, not judged.
    failures = list(suite.iter("failure"))
    assert [f.get("type") for f in failures] == ["invalid-name", "invalid-name"]
    assert any(safe(name) in f.text for f in failures)


def assert_matches_json_safely(suite: ET.Element, document: dict, command: str) -> None:
    """``assert_matches_json`` where names and messages hold what XML cannot: compared once made safe."""
    cases = cases_of(suite)
    assert int(suite.get("tests")) == document["summary"]["judged"] == len(cases)
    expected = Counter((safe(c), safe(n), safe(code), safe(m)) for c, n, code, m in json_failures(document))
    assert junit_failures(suite) == expected
    assert {(safe(c), safe(n)) for c, n in (key(f["object"]) for f in document["findings"])} <= set(cases)
