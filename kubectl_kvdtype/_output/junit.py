"""``-o junit``: a judging subcommand's report as JUnit XML, the test report CI systems show.

Jenkins, GitLab and GitHub's test-report actions read the same shape: a ``<testsuites>`` root, one
``<testsuite>`` for the subcommand run (``kubectl-kvdtype check``), and one ``<testcase>`` per
object the report names (``Report.objects``: every object judged, then any other object a finding
names). A finding that fails the run (``_kits.report.fails``: errors, and warnings with ``--fail-on
warning``) is a ``<failure>`` of its object's testcase, typed with its code; the other findings are
in that testcase's ``<system-out>``, so nothing is lost. The report's summary line goes to the
suite's ``<system-out>``, its warnings (what limited the report) to its ``<system-err>``.

``failures`` counts failed testcases, as the JUnit schema defines it; the suite's properties carry
the finding counts of the JSON report (``findings.errors``...), so the two can be compared.

The XML is built with ElementTree, never by hand, and every text is made safe first: characters
XML 1.0 cannot carry at all (control characters, unpaired surrogates) are written as visible
escapes (``\\x07``), and everything outside ASCII as character references, so the document stays
well-formed whatever an object's name or message holds and whatever encoding stdout has.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Optional

from kubectl_kvdtype._kits.codes import BY_CODE
from kubectl_kvdtype._kits.report import Finding, FleetMember, FleetReport, ObjectRef, Report, fails
from kubectl_kvdtype._output.format import Rendering

#: The tool's name in the testsuite names (``kubectl-kvdtype check``), as the binary is called.
TOOL = "kubectl-kvdtype"

#: Characters XML 1.0 cannot hold, not even as a character reference (its ``Char`` production).
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def safe(text: object) -> str:
    """``text`` with every character XML 1.0 cannot carry written as a visible escape."""
    return _NOT_XML.sub(_escape, str(text))


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def write_junit(report: Report, how: Rendering) -> str:
    return to_junit(report, how.command)


def write_fleet_junit(fleet: FleetReport, _how: Rendering) -> str:
    return fleet_to_junit(fleet)


def to_junit(report: Report, command: str) -> str:
    """The report as one JUnit XML document (ASCII text, well-formed whatever the report holds)."""
    root = ET.Element("testsuites", name=TOOL)
    counts = _suite(root, report, f"{TOOL} {command}".strip())
    root.attrib.update(counts)
    return _document(root)


def fleet_to_junit(fleet: FleetReport) -> str:
    """A fleet run: one ``<testsuite>`` per context, in the fleet's order, named after it. A context
    that could not be checked is a suite whose one testcase (the context) has an ``<error>``."""
    root = ET.Element("testsuites", name=TOOL)
    totals = {"tests": 0, "failures": 0, "errors": 0}
    for member in fleet.members:
        name = f"{TOOL} {fleet.command} --context {member.context}"
        if member.report is not None:
            counts = _suite(root, member.report, name, {"context": member.context})
        else:
            counts = _unchecked_suite(root, name, member)
        for key in totals:
            totals[key] += int(counts[key])
    root.attrib.update({key: str(value) for key, value in totals.items()})
    return _document(root)


def _unchecked_suite(root: ET.Element, name: str, member: FleetMember) -> dict[str, str]:
    suite = ET.SubElement(root, "testsuite", name=safe(name))
    properties = ET.SubElement(suite, "properties")
    for key, value in (("context", member.context), ("exit-status", int(member.status))):
        ET.SubElement(properties, "property", name=key, value=safe(value))
    case = ET.SubElement(suite, "testcase", classname="context", name=safe(member.context))
    ET.SubElement(case, "error", message=safe(member.error or ""), type=f"exit-{int(member.status)}")
    counts = {"tests": "1", "failures": "0", "errors": "1"}
    suite.attrib.update({**counts, "skipped": "0"})
    return counts


def _document(root: ET.Element) -> str:
    ET.indent(root)
    text = ET.tostring(root, encoding="unicode")
    # Non-ASCII as character references: the same document to a parser, and any stdout can carry it.
    ascii_text = text.encode("ascii", "xmlcharrefreplace").decode("ascii")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ascii_text + "\n"


def _suite(root: ET.Element, report: Report, name: str, extra: Optional[dict] = None) -> dict[str, str]:
    """One report's ``<testsuite>`` under ``root``; returns its counts (tests, failures, errors)."""
    suite = ET.SubElement(root, "testsuite", name=safe(name))
    _properties(suite, report, extra or {})
    failing: dict[ObjectRef, list[Finding]] = {}
    other: dict[ObjectRef, list[Finding]] = {}
    for finding in report.findings:
        bucket = failing if fails(finding.severity, report.fail_on) else other
        bucket.setdefault(finding.object, []).append(finding)
    objects = report.objects()
    for ref in objects:
        _testcase(suite, ref, failing.get(ref, []), other.get(ref, []))
    if report.summary_lines():
        ET.SubElement(suite, "system-out").text = safe("\n".join(report.summary_lines()))
    if report.warnings:
        ET.SubElement(suite, "system-err").text = safe("\n".join(report.warnings))
    counts = {"tests": str(len(objects)), "failures": str(len(failing)), "errors": "0"}
    suite.attrib.update({**counts, "skipped": "0"})
    return counts


def _properties(suite: ET.Element, report: Report, extra: dict) -> None:
    properties = ET.SubElement(suite, "properties")
    values = {**extra, "report": report.kind, "fail-on": report.fail_on,
              **{f"findings.{key}": value for key, value in report.counts().items()}}
    if "verdict" in report.summary:  # preflight's GO or NO-GO
        values["verdict"] = report.summary["verdict"]
    for name, value in values.items():
        ET.SubElement(properties, "property", name=name, value=safe(value))


def _testcase(suite: ET.Element, ref: ObjectRef, failing: list[Finding], other: list[Finding]) -> None:
    """One object: passing, or one ``<failure>`` per finding that fails the run."""
    classname = f"{ref.namespace}.{ref.kind}" if ref.namespace else ref.kind
    case = ET.SubElement(suite, "testcase", classname=safe(classname), name=safe(ref.name))
    for finding in failing:
        failure = ET.SubElement(case, "failure", message=safe(finding.message), type=safe(finding.code))
        failure.text = safe(_detail(finding))
    if other:
        ET.SubElement(case, "system-out").text = safe("\n".join(_line(f) for f in other))


def _line(finding: Finding) -> str:
    return f"{finding.severity} {finding.code}: {finding.message}"


def _detail(finding: Finding) -> str:
    """The failure's text: what it is about, the message, and what its code means."""
    meaning = BY_CODE[finding.code].meaning if finding.code in BY_CODE else ""
    lines = [f"{finding.severity} {finding.code}: {finding.object}", finding.message]
    return "\n".join(lines + ([f"{finding.code}: {meaning}"] if meaning else []))
