"""Fast tier: the ``Report`` every subcommand returns, and the exit status it decides."""

from __future__ import annotations

import pytest

from kubectl_kvdtype._kits.report import ERROR, FAIL_ON, INFO, WARNING, Column, ObjectRef, Report, fails
from kubectl_kvdtype._kits.status import EXIT_MEANINGS, ExitStatus, ManifestError, UsageError, exit_codes_epilog

POD = ObjectRef("Pod", "ml", "llama-0")
POOL = ObjectRef("KVCachePool", None, "shared")


#: A registered code of each severity: the registry (``_codes``) gives a finding its severity.
CODE_OF = {ERROR: "dtype-rejected", WARNING: "dtype-unknown", INFO: "binding-unused"}


def _report(*severities: str) -> Report:
    report = Report("CheckReport")
    for index, severity in enumerate(severities):
        finding = report.add(CODE_OF[severity], POD, f"finding {index}")
        assert finding.severity == severity
    return report


@pytest.mark.parametrize("severities, exit_zero, status", [
    ((), False, ExitStatus.OK),
    ((WARNING, INFO), False, ExitStatus.OK),
    ((ERROR,), False, ExitStatus.FINDINGS),
    ((ERROR, WARNING), True, ExitStatus.OK),  # --exit-zero: complete is 0 whatever was found
])
def test_exit_status_follows_error_findings_only(severities, exit_zero, status):
    assert _report(*severities).exit_status(exit_zero) is status


@pytest.mark.parametrize("severities, fail_on, exit_zero, status", [
    ((WARNING, INFO), "error", False, ExitStatus.OK),
    ((WARNING, INFO), "warning", False, ExitStatus.FINDINGS),
    ((INFO, INFO), "warning", False, ExitStatus.OK),  # info never fails
    ((ERROR,), "warning", False, ExitStatus.FINDINGS),
    ((WARNING,), "warning", True, ExitStatus.OK),  # --exit-zero still gives 0
])
def test_fail_on_chooses_the_severities_that_give_exit_1(severities, fail_on, exit_zero, status):
    report = _report(*severities)
    report.fail_on = fail_on
    assert report.exit_status(exit_zero) is status
    assert [f.severity for f in report.failing()] == [s for s in severities if fails(s, fail_on)]


def test_fails_is_the_one_rule():
    assert [fails(s) for s in (ERROR, WARNING, INFO)] == [True, False, False]
    assert [fails(s, WARNING) for s in (ERROR, WARNING, INFO)] == [True, True, False]
    assert FAIL_ON == (ERROR, WARNING)


def test_ignored_warnings_never_fail_even_with_fail_on_warning():
    report = _report(WARNING, INFO)
    report.fail_on = WARNING
    report.ignore({CODE_OF[WARNING]})
    assert report.exit_status() is ExitStatus.OK and report.ignored == 1


def test_objects_are_the_judged_ones_then_those_findings_name_and_json_counts_them():
    other = ObjectRef("Pod", "ml", "llama-1")
    report = Report("VerifyReport", judged=[other, POD])
    report.add(CODE_OF[ERROR], POOL, "about the pool")
    report.add(CODE_OF[WARNING], POD, "about a judged Pod")
    assert report.objects() == [other, POD, POOL]
    assert report.to_dict()["summary"]["judged"] == 3
    assert "judged" not in Report("EscapeStatus").to_dict()["summary"]  # a report that judges nothing


def test_ignoring_the_only_error_code_turns_exit_1_into_0_and_counts_it():
    report = _report(ERROR, ERROR, WARNING)
    assert report.exit_status() is ExitStatus.FINDINGS
    report.ignore({CODE_OF[ERROR]})
    assert report.exit_status() is ExitStatus.OK
    assert [f.code for f in report.findings] == [CODE_OF[WARNING]]
    assert report.counts() == {"errors": 0, "warnings": 1, "info": 0, "ignored": 2}
    assert report.findings_line() == "0 errors, 1 warning, 0 info, 2 ignored"


def test_ignoring_twice_keeps_counting():
    report = _report(ERROR, WARNING, INFO)
    report.ignore({CODE_OF[INFO]})
    report.ignore({CODE_OF[WARNING], "code-nothing"})
    assert report.ignored == 2 and report.count(ERROR) == 1


def test_findings_line_is_singular_and_plural():
    assert _report(ERROR, WARNING, WARNING, INFO, INFO).findings_line() == "1 error, 2 warnings, 2 info"
    assert _report().findings_line() == "0 errors, 0 warnings, 0 info"


def test_json_document_carries_items_findings_and_counts_next_to_the_summary():
    report = Report("VerifyReport", items=[{"name": "a"}], summary={"pods": 1})
    report.add("dtype-rejected", POD, "refused", engine="vLLM", value="bf16")
    document = report.to_dict()
    assert document == {
        "kind": "VerifyReport",
        "items": [{"name": "a"}],
        "findings": [{"code": "dtype-rejected", "severity": "error",
                      "object": {"kind": "Pod", "namespace": "ml", "name": "llama-0"},
                      "message": "refused", "engine": "vLLM", "value": "bf16"}],
        "summary": {"pods": 1, "findings": {"errors": 1, "warnings": 0, "info": 0, "ignored": 0}},
    }


def test_object_refs_name_themselves_as_kubectl_does():
    assert str(POD) == "Pod ml/llama-0"
    assert str(POOL) == "KVCachePool shared"  # cluster-scoped: no namespace
    assert POOL.to_dict() == {"kind": "KVCachePool", "namespace": None, "name": "shared"}


def test_column_cells_show_none_for_empty_values_and_call_readers():
    by_key = Column("DTYPE", "dtype")
    computed = Column("PODS", lambda item: len(item["pods"]))
    assert by_key.cell({"dtype": "fp8"}) == "fp8"
    assert by_key.cell({"dtype": ""}) == "<none>"
    assert by_key.cell({}) == "<none>"
    assert computed.cell({"pods": [1, 2]}) == 2
    assert computed.cell({"pods": []}) == 0  # zero is a value, not <none>


def test_every_exit_status_has_one_meaning_and_the_epilog_lists_them_in_order():
    assert set(EXIT_MEANINGS) == set(ExitStatus)
    epilog = exit_codes_epilog()
    positions = [epilog.index(f"{int(status)} {status.meaning}") for status in ExitStatus]
    assert positions == sorted(positions)
    assert [int(s) for s in ExitStatus] == [0, 1, 2, 3, 4, 129, 130, 143]


def test_errors_carry_their_exit_status():
    assert UsageError("x").status is ExitStatus.USAGE
    assert ManifestError("x").status is ExitStatus.INCOMPLETE
    assert ManifestError("the manifest a.yaml does not exist").message == "the manifest a.yaml does not exist"
