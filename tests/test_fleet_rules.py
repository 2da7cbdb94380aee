"""Fleet runs in-process (the fast tier): what is refused, which contexts are chosen in which
order, the fleet's exit status and verdict, and completing ``--contexts``. The runs themselves,
against several fake API servers, are tests/test_fleet.py."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest

from _support import ROOT, assert_one_clean_line, in_process
from kubectl_kvdtype._cli.fleet import REFUSED, select
from kubectl_kvdtype._kits.report import ERROR, Finding, FleetMember, FleetReport, ObjectRef, Report
from kubectl_kvdtype._kits.status import ExitStatus

pytestmark = pytest.mark.version_sensitive  # argparse and completion (test_tiers.py)

REFUSED_SPELLINGS = {"context": ["--context", "x"], "cluster": ["--cluster", "x"], "user": ["--user", "x"],
                     "server": ["--server", "https://x"], "token": ["--token", "s3cret"],
                     "certificate_authority": ["--certificate-authority", "ca.pem"],
                     "client_certificate": ["--client-certificate", "c.pem"], "client_key": ["--client-key", "k.pem"],
                     "insecure_skip_tls_verify": ["--insecure-skip-tls-verify"],
                     "tls_server_name": ["--tls-server-name", "x"], "username": ["--username", "u"],
                     "password": ["--password", "s3cret"], "filename": ["-f", "dump.yaml"]}


def test_every_refused_flag_has_a_spelling_here():
    assert set(REFUSED_SPELLINGS) == {dest for dest, _ in REFUSED}


@pytest.mark.parametrize("dest", sorted(REFUSED_SPELLINGS))
def test_connection_flags_and_manifests_are_refused_in_one_sentence(dest):
    status, out, err = in_process(["check", "--contexts", "a,b", *REFUSED_SPELLINGS[dest]], environ={})
    assert status == ExitStatus.USAGE and out == ""
    assert_one_clean_line(err)
    assert "cannot be used with --contexts/--all-contexts" in err
    assert "s3cret" not in err


@pytest.mark.parametrize("argv, words", [
    (["find-flags", "--fix", "--all-contexts"], "find-flags --fix writes to one cluster"),
    (["guard", "--apply", "--all-contexts"], "guard --apply writes to one cluster"),
    (["check", "--contexts", "a", "--all-contexts"], "--contexts and --all-contexts cannot be used together"),
    (["check", "--contexts", "a", "--parallel", "0"], "--parallel: invalid value '0'"),
])
def test_writes_and_contradictions_are_refused(argv, words):
    status, out, err = in_process(argv, environ={})
    assert (status, out) == (ExitStatus.USAGE, "")
    assert_one_clean_line(err)
    assert words in err


@pytest.mark.version_sensitive
@pytest.mark.parametrize("command", ["escape status", "completion bash"])
def test_subcommands_that_do_not_judge_take_no_fleet_flags(command):
    status, _, err = in_process([*command.split(), "--all-contexts"], environ={})
    assert status == ExitStatus.USAGE
    assert "--all-contexts" in err


def _options(contexts: list[str], all_contexts: bool = False) -> argparse.Namespace:
    return argparse.Namespace(contexts=contexts, all_contexts=all_contexts)


def test_contexts_keep_the_order_named_globs_sorted_and_each_once():
    available = ["prod-eu", "staging", "prod-us", "dev", "prod-ap"]
    chosen = select(_options(["staging,prod-*", "dev, prod-us", "typo"]), available)
    assert chosen == ["staging", "prod-ap", "prod-eu", "prod-us", "dev", "typo"]  # a typo fails in its own row
    assert select(_options([], all_contexts=True), available) == sorted(available)


@pytest.mark.parametrize("given, message", [
    (["qa-*"], "--contexts qa-*: no context of the kubeconfig matches"),
    ([","], "--contexts: name at least one context"),
])
def test_a_glob_that_matches_nothing_is_a_usage_error(given, message):
    from kubectl_kvdtype._kits.status import UsageError

    with pytest.raises(UsageError, match=message.replace("*", r"\*")):
        select(_options(given), ["prod-eu"])


@pytest.mark.e2e  # reading the kubeconfig imports the kubernetes client, which opens a socket
def test_a_glob_matching_nothing_in_the_kubeconfig_exits_2(tmp_path: Path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({"contexts": [{"name": "prod-eu", "context": {}}]}))
    status, out, err = in_process(["check", "--contexts", "dev-*"], environ={"KUBECONFIG": str(kubeconfig)})
    assert (status, out) == (ExitStatus.USAGE, "")
    assert_one_clean_line(err)


def _member(name: str, severity: str = "", error: str = "") -> FleetMember:
    if error:
        return FleetMember(name, ExitStatus.INCOMPLETE, error=error)
    report = Report(kind="CheckReport")
    if severity:
        report.findings.append(Finding("dtype-rejected", severity, ObjectRef("KVCachePoolBinding", "ns", "b"), "m."))
    return FleetMember(name, report.exit_status(), report=report)


@pytest.mark.parametrize("members, exit_zero, status, verdict", [
    ([_member("a"), _member("b")], False, ExitStatus.OK, "GO"),
    ([_member("a"), _member("b", ERROR)], False, ExitStatus.FINDINGS, "NO-GO"),
    ([_member("a"), _member("b", ERROR)], True, ExitStatus.OK, "NO-GO"),
    ([_member("a", ERROR), _member("b", error="x")], False, ExitStatus.INCOMPLETE, "INCOMPLETE"),
    ([_member("a"), _member("b", error="x")], True, ExitStatus.INCOMPLETE, "INCOMPLETE"),
])
def test_exit_status_and_verdict_of_a_fleet(members, exit_zero, status, verdict):
    fleet = FleetReport("preflight", members, exit_zero=exit_zero)
    assert fleet.exit_status() == status
    assert fleet.verdict() == verdict
    assert fleet.to_dict()["summary"]["exitStatus"] == int(status)


def test_a_context_that_could_not_be_checked_carries_its_error_and_status():
    entry = _member("c", error="cannot reach the cluster at https://c: refused").to_dict()
    assert entry == {"context": "c", "exitStatus": 3,
                     "error": {"message": "cannot reach the cluster at https://c: refused", "exitStatus": 3}}


@pytest.mark.version_sensitive
def test_contexts_complete_the_name_after_the_last_comma(tmp_path: Path):
    from kubectl_kvdtype._cli.complete import complete
    from kubectl_kvdtype._kits.env import Environment

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({"contexts": [{"name": n, "context": {}} for n in ("prod-a", "prod-b", "dev")]}))
    out = io.StringIO()
    complete(["--kubeconfig", str(kubeconfig), "check", "--contexts", "prod-a,p"], Environment(stdout=out, environ={}))
    assert out.getvalue().splitlines() == ["prod-a,prod-b", ":4"]


def test_todo_commands_name_the_context_quoted_for_the_shell():
    from kubectl_kvdtype._judging.todo import in_context

    command = "kubectl get pod p -n ns -o yaml > p.yaml  && kubectl kvdtype check -n ns -o wide"
    assert in_context(command, "prod-eu") == ("kubectl --context prod-eu get pod p -n ns -o yaml > p.yaml  && "
                                              "kubectl kvdtype --context prod-eu check -n ns -o wide")
    assert in_context("kubectl edit md x", "eu; rm -rf ~") == "kubectl --context 'eu; rm -rf ~' edit md x"


def test_a_report_kept_as_its_json_text_gives_the_same_fleet_document():
    from kubectl_kvdtype._output.documents import json_lines, to_json
    from kubectl_kvdtype._output.render import FORMATS, render_fleet

    def fleet() -> FleetReport:
        return FleetReport("check", [_member("a", ERROR), _member("b"), _member("c", error="unreachable")])

    assert [f.context_encoder.function for f in FORMATS if f.context_encoder] == ["json_lines"]  # what run() keeps
    plain, encoded = fleet(), fleet()
    for member in encoded.members:
        member.encode(json_lines)
    assert [m.encoded is not None for m in encoded.members] == [True, True, False]
    assert encoded.members[0].report is not None and encoded.members[0].report.findings == []  # objects let go
    assert (encoded.exit_status(), encoded.counts()) == (plain.exit_status(), plain.counts())
    # A small fleet is indented throughout, byte for byte as the fleet of reports still held is.
    text = render_fleet(encoded, "json")
    assert text == render_fleet(plain, "json") and '\n        "findings": [\n          {\n' in text
    document = json.loads(text)
    assert document["contexts"][0]["report"] == json.loads(to_json(plain.members[0].report.to_dict()))
    assert document["summary"]["failing"] == ["a"]


def test_a_fleet_past_the_pretty_threshold_in_all_is_one_entry_per_line_though_each_report_is_small():
    from kubectl_kvdtype._output.documents import PRETTY_JSON_ENTRIES, json_lines
    from kubectl_kvdtype._output.render import render_fleet

    def fleet() -> FleetReport:
        members = []
        for name in ("a", "b", "c"):  # each under the threshold, the three past it
            report = Report(kind="CheckReport")
            report.findings += [Finding("dtype-rejected", ERROR, ObjectRef("KVCachePoolBinding", "ns", f"b{i}"), "m.")
                                for i in range(PRETTY_JSON_ENTRIES // 2)]
            members.append(FleetMember(name, report.exit_status(), report=report))
        return FleetReport("check", members)

    plain, encoded = fleet(), fleet()
    for member in encoded.members:
        member.encode(json_lines)
    text = render_fleet(encoded, "json")
    assert text == render_fleet(plain, "json") and json.loads(text) == plain.to_dict() | {
        "contexts": [{**m.to_dict(), "report": m.report.to_dict()} for m in plain.members]}
    one_line = '          {"code": "dtype-rejected", "severity": "error", "object": {"kind": "KVCachePoolBinding", '
    assert sum(line.startswith(one_line) for line in text.splitlines()) == 3 * (PRETTY_JSON_ENTRIES // 2)


def test_the_helper_budget_lets_the_default_fleets_reads_all_go_side_by_side():
    """Each of the default fleet's contexts has every read of ``list_many`` in flight at once: the
    context's own thread and MAX_IN_FLIGHT - 1 helpers each, from the run's one budget."""
    from kubectl_kvdtype._commands.flags import DEFAULT_PARALLEL
    from kubectl_kvdtype._kits import threads
    from kubectl_kvdtype._sources import kinds

    wanted = DEFAULT_PARALLEL * (kinds.MAX_IN_FLIGHT - 1)
    assert wanted <= threads.MAX_HELPERS < 2 * wanted
    reference = " ".join((ROOT / "docs" / "reference.md").read_text().split())  # and the docs say both
    assert f"contexts are judged at once (default {DEFAULT_PARALLEL})" in reference
    assert f"({threads.MAX_HELPERS}, enough for the default" in reference
