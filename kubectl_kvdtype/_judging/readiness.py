"""``preflight``'s judgement: may this cluster upgrade now? GO, NO-GO or INCOMPLETE, and why.

One run gives what ``check``, ``find-flags`` and ``escape status`` give separately: their
judgements (their own report builders, not a copy of their rules), the Setting's state, and a
dry run of the upgrade per pool-attached role and per injected Pod (``_judging.upgrade``); the
to-do list comes from ``_judging.todo``. The verdict: GO, or NO-GO while any error finding remains
(warnings too with ``--fail-on warning``), or INCOMPLETE, never GO, when a kind that could change
it could not be read (``Report.not_examined``).
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence

from kubectl_kvdtype._commands.command import Context
from kubectl_kvdtype._judging import bindings as _bindings
from kubectl_kvdtype._judging import upgrade as _upgrade
from kubectl_kvdtype._judging.flags import FlagInventory, build_find_flags_report
from kubectl_kvdtype._judging.guard import GUARD_NOTED, guard_gets, note_guard
from kubectl_kvdtype._judging.managed import name_managers
from kubectl_kvdtype._judging.todo import COLUMNS, guard_items, in_context, todo
from kubectl_kvdtype._kits.codes import PREDICTED_DEPENDS, PREDICTED_FAILURE
from kubectl_kvdtype._kits.report import (
    ERROR,
    GO,
    INCOMPLETE,
    NO_GO,
    WARNING,
    Column,
    Finding,
    ObjectRef,
    Report,
    Section,
    added_tables,
    fails,
    resting_on,
)
from kubectl_kvdtype._sources import model as _model
from kubectl_kvdtype._sources.managers import ManagerReader


def preflight(context: Context) -> Report:
    """The PreflightReport of the run's cluster or manifests: one read of each kind (find-flags'
    inventory, which holds check's), then ``build_report``; with ``--context`` the to-do list's
    commands name it, to reach the cluster judged rather than the current context."""
    flags_inventory = FlagInventory.read(context.source, context.namespace, setting_in=context.system_namespace,
                                         beside=() if context.offline else guard_gets(GUARD_NOTED))
    setting, setting_error = _bindings.setting_of(flags_inventory.setting_read or [], context.system_namespace)
    check_inventory = _bindings.BindingInventory(
        flags_inventory.bindings, _bindings.consumers_of(flags_inventory.deployments, flags_inventory.pods),
        flags_inventory.deployments, setting, setting_error)
    report = build_report(check_inventory, flags_inventory, context.system_namespace, offline=context.offline,
                          ignore=set(context.common.ignore), fail_on=context.common.fail_on or ERROR,
                          source_findings=getattr(context.source, "findings", []),
                          managers=flags_inventory.managers_reader(context.source, context.offline))
    if not context.offline:
        note_guard(report, flags_inventory.beside, context.common.ignore)
        in_force = _model.setting_values(setting)[1] if setting else None
        report.items += guard_items(report.findings, in_force == "true", len(report.items))
    named = context.common.connection.context
    if named:
        for item in report.items:
            if item["command"]:
                item["command"] = in_context(item["command"], named)
    return report


def build_report(check_inventory: _bindings.BindingInventory, flags_inventory: FlagInventory, system_namespace: str,
                 offline: bool = False, ignore: Optional[set] = None, fail_on: str = "error",
                 source_findings: Iterable[Finding] = (), managers: Optional[ManagerReader] = None) -> Report:
    """The PreflightReport of the inventories: pure, so live and offline runs judge alike.

    ``source_findings`` (an object read twice from manifests) are added to the report by the
    command line after this; they count towards the verdict and the to-do list here. The verdict
    is the exit status's rule (``Report.exit_status``): INCOMPLETE exactly when the run exits 4,
    else NO-GO exactly when it exits 1 (``_kits.report.fails``). ``managers`` reads who manages the
    objects found (``_judging.managed``): their items go to their source.
    """
    ignore = ignore or set()
    checked = _bindings.build_check_report(check_inventory, system_namespace, offline=offline)
    flagged = build_find_flags_report(flags_inventory)
    predictions = _upgrade.predict(flags_inventory.deployments, flags_inventory.pods, flags_inventory.bindings)
    report = Report(kind="PreflightReport", columns=COLUMNS, findings_table=False,
                    empty_message="Nothing to do before the upgrade.", fail_on=fail_on)
    report.findings = checked.findings + flagged.findings
    _add_predicted_failures(predictions, report)
    report.ignore(ignore)
    if managers is not None:
        name_managers(report, managers)
    report.warnings = checked.warnings + flagged.warnings
    counted = report.findings + [f for f in source_findings if f.code not in ignore]
    report.items = todo(counted, check_inventory.consumers)
    report.sections = [Section("predictions", PREDICTION_COLUMNS, [p.to_dict() for p in predictions], wide=True)]
    # What preflight judged is what check and find-flags judge (the dry run covers their objects).
    report.judged = list(dict.fromkeys((checked.judged or []) + (flagged.judged or [])))
    errors = [f for f in counted if f.severity == ERROR]
    warnings = [f for f in counted if f.severity == WARNING]
    no_go = any(fails(f.severity, fail_on) for f in counted)
    setting = _setting_state(check_inventory, system_namespace, offline)
    report.unread = checked.unread + flagged.unread  # what could change the verdict, not read: never GO
    # Verdicts resting on a table added for the run (one an --ignore leaves out too): the line says so.
    added = added_tables(checked.findings + flagged.findings)
    resting = f" This verdict rests on {resting_on(added)}." if added else ""
    report.summary = {
        "verdict": INCOMPLETE if report.unread else NO_GO if no_go else GO,
        "incomplete": list(report.unread),
        "reason": _reason(errors, warnings, fail_on, report.unread) + resting,
        "addedTables": added,
        "failOn": fail_on,
        "setting": setting,
        "dryRun": {"roles": sum(1 for p in predictions if p.kind == _upgrade.MODEL_DEPLOYMENT),
                   "pods": sum(1 for p in predictions if p.kind == _upgrade.POD),
                   "outcomes": _upgrade.counts(predictions)},
        "todo": len(report.items),
    }
    report.headline = [setting["line"], _dry_run_line(predictions),
                       f"{report.summary['verdict']}: {report.summary['reason']}"]
    return report


def _add_predicted_failures(predictions: list[_upgrade.Prediction], report: Report) -> None:
    """A replica the dry run sees failing because of the upgrade, which no error finding names; one
    whose value depends on a variable the object does not set (a warning: a look item)."""
    covered = set()
    for finding in report.findings:
        if finding.severity == ERROR:
            covered.add((finding.object.kind, finding.object.namespace, finding.object.name))
            for consumer in finding.fields.get("consumers") or []:
                covered.add((consumer.get("kind"), consumer.get("namespace"), consumer.get("name")))
    for prediction in predictions:
        key = (prediction.kind, prediction.namespace, prediction.name)
        if prediction.outcome == _upgrade.UNSURE and "depends on" in prediction.text:
            ref = ObjectRef(prediction.kind, prediction.namespace, prediction.name)
            where = f" role {prediction.role}" if prediction.role else ""
            report.add(PREDICTED_DEPENDS, ref, f"{ref}{where}: after the upgrade it is {prediction.text}: what it "
                       "starts with is set outside the object.", role=prediction.role, container=prediction.container,
                       dtype=prediction.dtype, argv=list(prediction.argv), field_path=prediction.field_path)
        elif prediction.broken and not prediction.fails_anyway and key not in covered:
            ref = ObjectRef(prediction.kind, prediction.namespace, prediction.name)
            where = f" role {prediction.role}" if prediction.role else ""
            report.add(PREDICTED_FAILURE, ref,
                       f"{ref}{where}: after the upgrade it {prediction.text} (the argv the upgrade renders, read "
                       f"as {' '.join(filter(None, [prediction.engine, prediction.engine_version]))} reads it).",
                       role=prediction.role, container=prediction.container, dtype=prediction.dtype,
                       error=prediction.error or None, argv=list(prediction.argv), field_path=prediction.field_path)


def _setting_state(inventory: _bindings.BindingInventory, system_namespace: str, offline: bool) -> dict:
    """Whether the operator already enforces the dtype: the Setting exists and status.value is "true"."""
    name = f"{system_namespace}/{_model.SETTING_NAME}"
    requested, in_force = _model.setting_values(inventory.setting) if inventory.setting else (None, None)
    enforcing = in_force == "true"
    if inventory.setting is None and offline:
        line = f"Setting {name}: not in the manifests, so whether the dtype is enforced yet is not known."
        state = "unknown"
    elif inventory.setting is None and inventory.setting_error and "not found" not in inventory.setting_error:
        line = f"Setting {name}: unreadable ({inventory.setting_error}), so whether the dtype is enforced is not known."
        state = "unknown"
    elif inventory.setting is None:
        line = (f"Setting {name}: not yet: it does not exist, so this operator does not render the dtype; "
                "the upgrade turns it on.")
        state = "not-yet"
    elif enforcing:
        line = (f'Setting {name}: enforcing (status.value "true"): the operator already renders each Binding\'s '
                "dtype; the dry run is what every replica does once recreated.")
        state = "enforcing"
    else:
        value = f'"{in_force}"' if in_force is not None else "unset"
        line = (f"Setting {name}: not yet enforcing (status.value {value}): nothing is rendered until it is on, "
                f"and the dry run is what every replica does then.")
        state = "not-yet"
    return {"namespace": system_namespace, "name": _model.SETTING_NAME, "state": state, "enforcing": enforcing,
            "value": in_force, "requested": requested, "line": line}
_OUTCOME_WORDS = {
    _upgrade.STARTS: "start with their Binding's dtype", _upgrade.OWN_COPY: "start with their own copy of the flag",
    _upgrade.FAILS: "fail to start", _upgrade.REFUSED: "refused at admission",
    _upgrade.NO_BINDING: "name a Binding that does not exist", _upgrade.UNSURE: "unsure",
    _upgrade.NOT_JUDGED: "not judged (other engines)", _upgrade.UNCHANGED: "take-over roles unchanged",
}


def _dry_run_line(predictions: list[_upgrade.Prediction]) -> str:
    if not predictions:
        return "Dry run of the upgrade: no pool-attached role or injected Pod in scope."
    counts = _upgrade.counts(predictions)
    parts = [f"{counts[o]} {_OUTCOME_WORDS[o]}" for o in _OUTCOME_WORDS if counts.get(o)]
    return (f"Dry run of the upgrade over {len(predictions)} role(s) and injected Pod(s): {', '.join(parts)} "
            "(-o wide shows each).")


def _reason(errors: list[Finding], warnings: list[Finding], fail_on: str, unread: Sequence[str] = ()) -> str:
    codes = ", ".join(dict.fromkeys(f.code for f in errors))
    if errors:
        found = (f"{len(errors)} error finding(s) ({codes}) must be fixed first: work through the to-do list in "
                 f"order, then run preflight again.")
    elif warnings and fail_on == "warning":
        found = f"no error finding, but {len(warnings)} warning(s) and --fail-on warning."
    elif warnings:
        found = f"no error finding; {len(warnings)} warning(s) worth a look in the to-do list."
    else:
        found = "no error or warning finding."
    if not unread:
        return found
    return (f"{', '.join(unread)} could not be read (what is there may pass the flag or fail the upgrade unseen; "
            f"run preflight as a user who may read it), so the verdict is not GO; in what was read, {found}")
PREDICTION_COLUMNS = [
    Column("NAMESPACE", "namespace", namespace=True),
    Column("KIND", "kind"),
    Column("NAME", "name"),
    Column("ROLE/CONTAINER", lambda row: row["role"] or row["container"]),
    Column("ENGINE", lambda row: f"{row['engine'] or '?'}{' ' + row['engineVersion'] if row['engineVersion'] else ''}"),
    Column("DTYPE", "dtype"),
    Column("OUTCOME", "outcome", status=True),
    Column("AFTER THE UPGRADE", "prediction"),
]
