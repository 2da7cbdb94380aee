"""``-o sarif``: a report as a SARIF 2.1.0 log, what code-scanning views in CI read.

One run; ``tool.driver`` lists one rule per finding code the subcommand can report (the codes
registry's meaning and severity), and each finding is one result at the registry's level. Every
result names its object as a logical location (kind, namespace, name). With ``-f`` a result also
points at the file and line (``Place``, found by ``_sources.positions``): the line of the field the
finding is about when the judgement knows it (a role's ``extraArgs`` entry, a Binding's
``spec.domain.dtype``), else the line where the object starts. Objects read from a cluster or
from standard input have no file, so no physical location.
"""

from __future__ import annotations

import json
import os
import pathlib
from typing import Optional
from urllib.parse import quote

from kubectl_kvdtype import HOMEPAGE, __version__
from kubectl_kvdtype._kits.codes import BY_CODE, ERROR, INFO, WARNING, Code, codes_of
from kubectl_kvdtype._kits.report import Finding, FleetReport, Locate, ObjectRef, Place, Report
from kubectl_kvdtype._output.format import Rendering

SARIF_VERSION = "2.1.0"
#: The schema of SARIF 2.1.0 as OASIS publishes it (the errata 01 text, the standard in force).
SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
TOOL_NAME = "kubectl-kvdtype"
#: A finding's severity as a SARIF level.
LEVELS = {ERROR: "error", WARNING: "warning", INFO: "note"}
#: The base a relative artifact URI is resolved against: the directory the plugin ran in.
SOURCE_ROOT = "%SRCROOT%"
#: The most runs GitHub code scanning takes from one SARIF file: a fleet of more contexts is still
#: one log (valid SARIF), and the plugin warns that GitHub refuses it whole, so split the fleet.
GITHUB_MAX_RUNS = 20
#: Up to this many results the log is indented; past it, written compactly (the indenting
#: encoder is pure Python and slow on big logs; a parser reads both alike).
PRETTY_RESULTS = 1000


def write_sarif(report: Report, how: Rendering) -> str:
    return to_sarif(report, how.command, how.locate)


def write_fleet_sarif(fleet: FleetReport, _how: Rendering) -> str:
    return fleet_to_sarif(fleet)


def fleet_warning(contexts: int) -> Optional[str]:
    """A fleet's log has one run per context: past ``GITHUB_MAX_RUNS`` GitHub refuses the whole file."""
    if contexts <= GITHUB_MAX_RUNS:
        return None
    return (f"this SARIF log has {contexts} runs, one per context: GitHub code scanning rejects a file of more "
            f"than {GITHUB_MAX_RUNS}, so upload the fleet in parts (--contexts 'prod-*'...)")


def to_sarif(report: Report, command: str, locate: Optional[Locate] = None, cwd: Optional[str] = None) -> str:
    """The SARIF log of a report of ``command`` (check, find-flags, verify, preflight)."""
    return _log([_run(report, command, locate, cwd or os.getcwd())])


def fleet_to_sarif(fleet: FleetReport) -> str:
    """A fleet run: one run per context, in the fleet's order, each with its own
    ``automationDetails.id`` (``kvdtype/<context>/``, a category: GitHub code scanning tells runs of
    one tool apart by it). A context that could not be checked is a run without results whose
    invocation failed, with the error as its notification."""
    runs = []
    for member in fleet.members:
        if member.report is not None:
            run = _run(member.report, fleet.command, None, os.getcwd())
        else:
            run = _run(Report(kind=""), fleet.command, None, os.getcwd())
            run["invocations"] = [{"executionSuccessful": False, "exitCode": int(member.status),
                                   "toolExecutionNotifications": [{"level": "error",
                                                                   "message": {"text": member.error or ""}}]}]
        run["automationDetails"] = {"id": automation_id(member.context)}
        runs.append(run)
    return _log(runs)


def automation_id(context: str) -> str:
    """A context's run category: ``kvdtype/<context>/`` (the trailing slash: no run id after it)."""
    return f"kvdtype/{context}/"


def _run(report: Report, command: str, locate: Optional[Locate], cwd: str) -> dict:
    rules = _rules(command, report)
    index = {rule["id"]: number for number, rule in enumerate(rules)}
    results = [_result(finding, index, locate, cwd) for finding in report.findings]
    run: dict = {
        "tool": {"driver": {"name": TOOL_NAME, "version": __version__, "semanticVersion": __version__,
                            "informationUri": HOMEPAGE, "rules": rules}},
        "invocations": [{"executionSuccessful": True,
                         "toolExecutionNotifications": [{"level": "warning", "message": {"text": warning}}
                                                        for warning in report.warnings]}],
        "results": results,
    }
    if any(location.get("physicalLocation", {}).get("artifactLocation", {}).get("uriBaseId") == SOURCE_ROOT
           for result in results for location in result["locations"]):
        run["originalUriBaseIds"] = {SOURCE_ROOT: {"uri": _directory_uri(cwd)}}
    return run


def _log(runs: list[dict]) -> str:
    log = {"$schema": SCHEMA_URI, "version": SARIF_VERSION, "runs": runs}
    if sum(len(run["results"]) for run in runs) <= PRETTY_RESULTS:
        return json.dumps(log, indent=2) + "\n"
    return json.dumps(log, separators=(",", ":")) + "\n"


# --- Rules ------------------------------------------------------------------------------------

def _rules(command: str, report: Report) -> list[dict]:
    """A rule per code the subcommand can report, in the registry's order (and any other code a
    finding has, so that every result's rule is listed)."""
    codes = list(codes_of(command)) if command else []
    codes += [code for code in dict.fromkeys(f.code for f in report.findings) if code not in codes]
    return [_rule(BY_CODE[code]) for code in codes]


def _rule(entry: Code) -> dict:
    reporters = ", ".join(entry.emitted_by)
    full = f"{_sentence(entry.meaning)} Severity: {entry.severity_text}. Reported by: {reporters}."
    help_text = (f"{full} Each result's message says what to do about its object. "
                 f"--ignore {entry.code} drops these findings.")
    return {
        "id": entry.code,
        "shortDescription": {"text": entry.meaning},
        "fullDescription": {"text": full},
        "help": {"text": help_text},
        "defaultConfiguration": {"level": LEVELS[entry.severity]},
        "properties": {"severity": entry.severity, "subcommands": list(entry.emitted_by)},
    }


def _sentence(text: str) -> str:
    return text + ("" if text.endswith(".") else ".")


# --- Results ----------------------------------------------------------------------------------

def _result(finding: Finding, rule_index: dict[str, int], locate: Optional[Locate], cwd: str) -> dict:
    location: dict = {}
    place = locate(finding) if locate else None
    if place is not None:
        location["physicalLocation"] = _physical(place, cwd)
    location["logicalLocations"] = [logical_location(finding.object)]
    return {
        "ruleId": finding.code,
        "ruleIndex": rule_index[finding.code],
        "level": LEVELS[finding.severity],
        "message": {"text": finding.message},
        "locations": [location],
        "properties": {"object": finding.object.to_dict(), **finding.fields},
    }


def logical_location(ref: ObjectRef) -> dict:
    """The object as a logical location: ``ModelDeployment/team-a/qwen-chat``."""
    parts = [ref.kind, ref.namespace, ref.name] if ref.namespace else [ref.kind, ref.name]
    return {"name": ref.name, "fullyQualifiedName": "/".join(parts), "kind": "resource",
            "properties": {"kind": ref.kind, "namespace": ref.namespace}}


def _physical(place: Place, cwd: str) -> dict:
    physical: dict = {"artifactLocation": artifact_location(place.path, cwd)}
    if place.line is None:
        return physical
    if place.field_line is None:
        physical["region"] = {"startLine": place.line}
        return physical
    physical["region"] = {"startLine": place.field_line}
    if place.end_line and place.end_line > place.line:  # the object around the field
        physical["contextRegion"] = {"startLine": place.line, "endLine": place.end_line}
    return physical


def artifact_location(path: str, cwd: str) -> dict:
    """The file as a URI reference: relative to ``cwd`` (the source root) when it is under it,
    else an absolute ``file:`` URI."""
    absolute = os.path.abspath(os.path.join(cwd, path))
    try:
        relative = os.path.relpath(absolute, cwd)
    except ValueError:  # another drive (Windows): no relative path
        relative = os.pardir
    if relative != os.pardir and not relative.startswith(os.pardir + os.sep):
        return {"uri": quote(relative.replace(os.sep, "/")), "uriBaseId": SOURCE_ROOT}
    return {"uri": pathlib.Path(absolute).as_uri()}


def _directory_uri(directory: str) -> str:
    uri = pathlib.Path(os.path.abspath(directory)).as_uri()
    return uri if uri.endswith("/") else uri + "/"
