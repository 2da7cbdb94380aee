"""The report every subcommand returns: items, findings, a summary, and the exit status.

Subcommands build a ``Report`` from plain data and never print; ``_output.render`` turns it into text and
the report itself decides the exit status (after ``--ignore``, ``--fail-on`` and ``--exit-zero``),
so that rule lives in one place: ``fails`` says which findings fail a run, and the exit status,
preflight's NO-GO and ``-o junit``'s failures all ask it. So does the rule for a half answer: a
kind the verdict depends on that could not be read is recorded with ``Report.not_examined``, and
the exit status says INCOMPLETE (``ExitStatus.PARTIAL``) before anything the findings say.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence, Union

from kubectl_kvdtype._kits.codes import ERROR, INFO, KIND_NOT_EXAMINED, TABLE_ADDED, WARNING, lookup, severity_of
from kubectl_kvdtype._kits.records import field, record_type, replace
from kubectl_kvdtype._kits.status import ExitStatus

__all__ = ["ERROR", "FAIL_ON", "GO", "INCOMPLETE", "INFO", "NO_GO", "WARNING", "Column", "FieldPath", "Finding",
           "FleetMember", "FleetReport", "ObjectRef", "Report", "fails"]

#: ``--fail-on``'s choices: the least severity that fails a run (exit 1), default ``error``.
FAIL_ON = (ERROR, WARNING)
#: preflight's verdicts: NO-GO exactly when the run fails (exit 1); INCOMPLETE, never GO, when a
#: kind the verdict depends on could not be read (exit 4), and for a fleet with a context that
#: could not be checked (exit 3) or is incomplete.
GO, NO_GO, INCOMPLETE = "GO", "NO-GO", "INCOMPLETE"
#: A report's line(s) under its table: one line, or several (``Report.headline``).
Headline = Union[str, Sequence[str]]
#: The severities that fail a run, for each ``--fail-on`` value. Info never fails.
_FAILING = {ERROR: (ERROR,), WARNING: (ERROR, WARNING)}


def fails(severity: str, fail_on: str = ERROR) -> bool:
    """Whether a finding of ``severity`` fails the run under ``--fail-on fail_on``: the one rule."""
    return severity in _FAILING[fail_on]


#: Where a field is in an object, from its root: keys and list indices, such as
#: ``("spec", "roles", 0, "extraArgs", 2)``.
FieldPath = tuple[Union[str, int], ...]


@record_type(frozen=True)
class ObjectRef:
    """The object a finding is about, as kubectl names it."""

    kind: str
    namespace: Optional[str]
    name: str

    def to_dict(self) -> dict:
        return {"kind": self.kind, "namespace": self.namespace, "name": self.name}

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"


@record_type(frozen=True)
class Finding:
    """One thing a human should know: ``fields`` are the code's own extra keys in JSON.

    ``field_path`` is the one field of the object the finding is about, when the judgement knows
    it (a role's ``extraArgs`` entry, a Binding's dtype): ``-o sarif`` points at its line. It is
    not part of the JSON/YAML report, whose content stays what it was.
    """

    code: str
    severity: str
    object: ObjectRef
    message: str
    fields: dict = field(default_factory=dict)
    field_path: Optional[FieldPath] = None

    @classmethod
    def of(cls, code: str, obj: ObjectRef, message: str, *, field_path: Optional[FieldPath] = None,
           **fields: Any) -> "Finding":
        """A finding of a registered code, with the severity the registry gives it."""
        return cls(code, severity_of(code), obj, message, fields, field_path)

    def to_dict(self) -> dict:
        return {"code": self.code, "severity": self.severity, "object": self.object.to_dict(),
                "message": self.message, **self.fields}


@record_type(frozen=True)
class Column:
    """One table column: ``value`` reads the cell from an item; ``wide`` columns need -o wide."""

    header: str
    value: Union[str, Callable[[dict], Any]]
    wide: bool = False
    status: bool = False  # coloured by its value on a terminal
    namespace: bool = False  # shown only when the report spans namespaces

    def cell(self, item: dict) -> Any:
        value = self.value(item) if callable(self.value) else item.get(self.value)
        return "<none>" if value is None or value == "" else value


@record_type
class Section:
    """A second list of rows a report carries besides its items (``preflight``'s predictions):
    a table of its own (under ``-o wide`` only when ``wide``), and a key of its own in JSON/YAML."""

    key: str
    columns: list[Column]
    rows: list[dict]
    wide: bool = False


@record_type
class Report:
    """What a subcommand found. ``kind`` names the JSON document (``CheckReport``)."""

    kind: str
    columns: list[Column] = field(default_factory=list)
    items: list[dict] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    summary: dict = field(default_factory=dict)
    #: The line(s) for humans under the table, built by the subcommand from ``summary``: one line,
    #: or several (preflight's), or a function of the report giving them, for lines that count
    #: findings: made when the report is shown (``summary_lines``), once the command line has added
    #: the source's findings and dropped the --ignore'd ones, so that they count exactly what
    #: ``-o json`` counts (``counts``). A line is one line whatever it holds: a line break a
    #: cluster's string carries is escaped when shown, never a line of its own.
    headline: Union[Headline, Callable[["Report"], Headline]] = ""
    #: Said before the headline: where an empty result looked ("In namespace team-a: ").
    lead: str = ""
    #: Said on stderr, not part of the result: things that limit what the report could see.
    warnings: list[str] = field(default_factory=list)
    #: Said on stderr when there are no items (kubectl: "No resources found").
    empty_message: str = "No objects found."
    ignored: int = 0
    #: A subcommand whose result is text, not findings (``completion``), sets this: it is printed
    #: verbatim whatever ``-o`` says, and nothing else is printed.
    text: Optional[str] = None
    #: Objects a subcommand would create; when set, ``-o yaml`` prints them as a multi-document
    #: YAML stream of manifests (for GitOps) instead of the report document.
    manifests: list[dict] = field(default_factory=list)
    #: JSON patches a subcommand would send (``find-flags --fix``): what ``-o patch`` prints.
    patches: Optional[list[dict]] = None
    #: Extra tables, printed before the items, each under its own key in JSON/YAML.
    sections: list[Section] = field(default_factory=list)
    #: False when the items already say everything the findings do (``preflight``'s to-do list):
    #: the findings stay in JSON/YAML but get no table of their own.
    findings_table: bool = True
    #: The objects a judging subcommand judged, passing or not (``-o junit``: one testcase each,
    #: with the objects findings name besides; see ``objects``). None: the report judges nothing.
    judged: Optional[list[ObjectRef]] = None
    #: ``--fail-on``: the least severity that fails the run (set from the command line).
    fail_on: str = ERROR
    #: The kinds (``plural.group``) the verdict depends on that could not be read (``not_examined``):
    #: the report is incomplete, whatever its findings; ``--ignore`` drops their findings, not this.
    unread: list[str] = field(default_factory=list)

    def add(self, code: str, obj: ObjectRef, message: str, *, field_path: Optional[FieldPath] = None,
            **fields: Any) -> Finding:
        """Record a finding; its severity is the registry's (``_kits.codes``), never the caller's."""
        finding = Finding.of(code, obj, message, field_path=field_path, **fields)
        self.findings.append(finding)
        return finding

    def not_examined(self, ref: ObjectRef, resource: str, why: str, unseen: str) -> None:
        """A kind whose objects could change the verdict could not be read (403, or 404 on a served
        group): a ``kind-not-examined`` finding says so, and the report is incomplete (exit 4, and
        preflight's INCOMPLETE), the one rule of a half answer for every subcommand that judges."""
        if resource not in self.unread:
            self.unread.append(resource)
        self.add(KIND_NOT_EXAMINED, ref, f"{resource} not examined: {why}; {unseen}.", resource=resource)

    @property
    def complete(self) -> bool:
        """Whether everything the verdict depends on was read."""
        return not self.unread

    def escalate(self, code: str) -> None:
        """Raise ``code``'s findings to the severity the registry gives it when a wait gives up."""
        severity = lookup(code).escalated
        if severity is None:
            raise ValueError(f"finding code {code!r} does not escalate")
        self.findings = [replace(f, severity=severity) if f.code == code else f for f in self.findings]

    def ignore(self, codes: set[str]) -> None:
        """Drop the findings whose code the user chose to ignore, counting them."""
        kept = [f for f in self.findings if f.code not in codes]
        self.ignored += len(self.findings) - len(kept)
        self.findings = kept

    def count(self, severity: str) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

    def failing(self) -> list[Finding]:
        """The findings that fail the run: errors, and warnings too with ``--fail-on warning``."""
        return [f for f in self.findings if fails(f.severity, self.fail_on)]

    def exit_status(self, exit_zero: bool = False) -> ExitStatus:
        """4 when the report is incomplete (even with --exit-zero: it is not complete), else 1 when
        findings fail the run (not with --exit-zero), else 0."""
        if not self.complete:
            return ExitStatus.PARTIAL
        if not exit_zero and self.failing():
            return ExitStatus.FINDINGS
        return ExitStatus.OK

    def objects(self) -> list[ObjectRef]:
        """Every object judged, then every other object a finding names, each once, in that order."""
        seen = dict.fromkeys(self.judged or ())
        for finding in self.findings:
            seen.setdefault(finding.object)
        return list(seen)

    def counts(self) -> dict:
        return {"errors": self.count(ERROR), "warnings": self.count(WARNING), "info": self.count(INFO),
                "ignored": self.ignored}

    def summary_lines(self) -> list[str]:
        """The headline's lines as shown under the table (and in JUnit's system-out), counting the
        report as it is now; the lead before the first."""
        made = self.headline(self) if callable(self.headline) else self.headline
        lines = [line for line in ([made] if isinstance(made, str) else made) if line]
        if lines and self.lead:
            lines[0] = self.lead + lines[0]
        return lines

    def to_dict(self) -> dict:
        judged = {} if self.judged is None else {"judged": len(self.objects()), "incomplete": list(self.unread)}
        return {"kind": self.kind, "items": self.items,
                "findings": [f.to_dict() for f in self.findings],
                **{section.key: section.rows for section in self.sections},
                "summary": {**self.summary, **judged, "findings": self.counts()}}

    def findings_line(self) -> str:
        """``2 errors, 1 warning, 0 info`` from ``counts``, the numbers ``-o json`` prints."""
        counts = self.counts()
        parts = [_plural(counts["errors"], "error"), _plural(counts["warnings"], "warning"),
                 _plural(counts["info"], "info", "info")]
        if counts["ignored"]:
            parts.append(f"{counts['ignored']} ignored")
        return ", ".join(parts)


def entries(document: dict) -> int:
    """The entries of a report's document (``Report.to_dict``): its items, findings and sections'
    rows, what decides how ``-o json`` lays it out (``_output.documents``)."""
    return sum(len(value) for value in document.values() if isinstance(value, list))


def added_tables(findings: Sequence[Finding]) -> list[dict]:
    """The engine tables added for the run (KUBECTL_KVDTYPE_ENGINE_TABLES) that verdicts rest on, once
    each, from the ``engine-table-added`` findings: file, engine, release, whether it replaced the
    table this tool ships for that release."""
    tables: dict[tuple, dict] = {}
    for finding in findings:
        if finding.code == TABLE_ADDED:
            fields = finding.fields
            key = (fields.get("engineTables"), fields.get("engine"), fields.get("judgedAs"))
            tables.setdefault(key, {"file": key[0], "engine": key[1], "version": key[2],
                                    "replacesShipped": bool(fields.get("replacesShipped"))})
    return list(tables.values())


def table_key(table: dict) -> tuple:
    """One added table's identity, whichever report named it."""
    return (table["file"], table["engine"], table["version"])


def resting_on(tables: Sequence[dict]) -> str:
    """What a verdict line says verdicts rest on when tables added for the run decided them ("" when
    none did): a GO or NO-GO that a file made, not the tables this release ships, is never silent
    about it."""
    if not tables:
        return ""
    parts = [f"{t['engine']} {t['version']} from {t['file']}" + (
        ", in place of the table this tool ships for that release" if t["replacesShipped"] else "")
        for t in tables]
    what = "an engine table" if len(tables) == 1 else f"{len(tables)} engine tables"
    return f"{what} added for this run (KUBECTL_KVDTYPE_ENGINE_TABLES): {'; '.join(parts)}"


def _plural(count: int, word: str, plural: Optional[str] = None) -> str:
    return f"{count} {word if count == 1 else (plural or word + 's')}"


@record_type
class FleetMember:
    """One kubeconfig context of a fleet run: its report, or the one-line error that stopped it,
    and the exit status the same run would have had on that context alone."""

    context: str
    status: ExitStatus
    report: Optional[Report] = None
    error: Optional[str] = None
    #: The report as its ``-o json`` text, once ``encode`` has let the report's objects go.
    encoded: Optional[str] = None
    #: The entries of the encoded report's document (``entries``).
    entries: int = 0
    _failing: bool = False
    _counts: dict = field(default_factory=dict)
    _added: list = field(default_factory=list)

    @property
    def checked(self) -> bool:
        return self.report is not None

    @property
    def incomplete(self) -> bool:
        """Checked, but a kind its verdict depends on could not be read (``Report.not_examined``)."""
        return self.report is not None and not self.report.complete

    @property
    def failing(self) -> bool:
        """Whether its findings fail the run (``--exit-zero`` aside)."""
        if self.encoded is not None:
            return self._failing
        return self.report is not None and bool(self.report.failing())

    def counts(self) -> dict:
        return self._counts if self.encoded is not None else self.report.counts() if self.report else {}

    @property
    def added_tables(self) -> list[dict]:
        """The added engine tables its verdicts rest on (preflight's ``summary.addedTables``)."""
        if self.encoded is not None or self.report is None:
            return self._added
        return list(self.report.summary.get("addedTables") or [])

    def encode(self, to_text: Callable[[dict], str]) -> None:
        """Keep the report only as its JSON text (``-o json``, where nothing else is printed): the
        fleet is printed once every context is done, and a finished 10,000-deployment report holds
        ~80 MB of objects, its text a fraction. Its warnings and summary line stay."""
        report = self.report
        if report is None:
            return
        self._failing, self._counts, self._added = bool(report.failing()), report.counts(), self.added_tables
        document = report.to_dict()
        self.entries, self.encoded = entries(document), to_text(document)
        self.report = Report(kind=report.kind, warnings=report.warnings, headline=report.summary_lines(),
                             empty_message=report.empty_message, fail_on=report.fail_on, unread=report.unread)

    def to_dict(self) -> dict:
        """Its entry of the FleetReport; an encoded report is None here (``_output.render`` writes its text)."""
        entry: dict = {"context": self.context, "exitStatus": int(self.status)}
        if self.report is not None:
            entry["report"] = None if self.encoded is not None else self.report.to_dict()
        else:
            entry["error"] = {"message": self.error or "", "exitStatus": int(self.status)}
        return entry


@record_type
class FleetReport:
    """The same judging subcommand run on several contexts (``--contexts``, ``--all-contexts``), in
    the order the contexts were named. ``kind`` is the JSON document's (``FleetReport``)."""

    command: str
    members: list[FleetMember]
    exit_zero: bool = False
    kind: str = "FleetReport"

    def exit_status(self) -> ExitStatus:
        """The precedence of one run, over the contexts: 3 when a context could not be checked, else
        4 when one is incomplete (both even with --exit-zero), else 1 when one has findings that fail
        the run (not with --exit-zero), else 0."""
        if any(not m.checked for m in self.members):
            return ExitStatus.INCOMPLETE
        if any(m.incomplete for m in self.members):
            return ExitStatus.PARTIAL
        if not self.exit_zero and any(m.failing for m in self.members):
            return ExitStatus.FINDINGS
        return ExitStatus.OK

    def verdict(self) -> str:
        """preflight's verdict over the fleet: GO only when every context is GO; INCOMPLETE when any
        could not be checked or is incomplete, as the exit status puts them first."""
        if any(not m.checked or m.incomplete for m in self.members):
            return INCOMPLETE
        return NO_GO if any(m.failing for m in self.members) else GO

    def counts(self) -> dict:
        totals = {"errors": 0, "warnings": 0, "info": 0, "ignored": 0}
        for member in self.members:
            for key, value in member.counts().items():
                totals[key] += value
        return totals

    def summary(self) -> dict:
        summary: dict = {
            "contexts": len(self.members),
            "checked": sum(1 for m in self.members if m.checked),
            "notChecked": [m.context for m in self.members if not m.checked],
            "incomplete": [m.context for m in self.members if m.incomplete],
            "failing": [m.context for m in self.members if m.failing],
            "findings": self.counts(),
            "exitStatus": int(self.exit_status()),
        }
        if self.command == "preflight":
            summary["verdict"] = self.verdict()
        return summary

    def to_dict(self) -> dict:
        return {"kind": self.kind, "command": self.command,
                "contexts": [member.to_dict() for member in self.members], "summary": self.summary()}

    def headline(self) -> str:
        """The fleet's line under the per-context lines."""
        checked = sum(1 for m in self.members if m.checked)
        failing = [m.context for m in self.members if m.failing]
        missing = [m.context for m in self.members if not m.checked]
        partial = [m.context for m in self.members if m.incomplete]
        parts = [f"{checked} of {len(self.members)} context(s) checked"]
        if partial:
            parts.append(f"incomplete: {', '.join(partial)} (a kind the verdict depends on could not be read)")
        if failing:
            parts.append(f"failing findings in {', '.join(failing)}")
        if missing:
            parts.append(f"not checked: {', '.join(missing)}")
        resting = [m for m in self.members if m.added_tables]
        if resting:
            tables = list({table_key(t): t for m in resting for t in m.added_tables}.values())
            parts.append(f"the verdicts of {', '.join(m.context for m in resting)} rest on {resting_on(tables)}")
        lead = f"Fleet verdict: {self.verdict()}" if self.command == "preflight" else "Fleet"
        return f"{lead}: {'; '.join(parts)}; exit {int(self.exit_status())}."


@record_type(frozen=True)
class Place:
    """Where an object read with ``-f`` is: the file as given, the object's first and last line,
    and the line of the field a finding is about (lines 1-based; None when not known)."""

    path: str
    line: Optional[int] = None
    end_line: Optional[int] = None
    field_line: Optional[int] = None


#: Finds a finding's object in the ``-f`` input; None: it has no file (a cluster, standard input).
Locate = Callable[[Finding], Optional[Place]]
