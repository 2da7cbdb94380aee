"""``escape rebind``'s report: one row per step, the summary and the headline of each mode."""

from __future__ import annotations

from typing import Optional

from kubectl_kvdtype._changes.journal import Journal
from kubectl_kvdtype._changes.rebind.steps import Action, Plan, RebindOptions
from kubectl_kvdtype._commands.command import Context
from kubectl_kvdtype._kits.codes import SETTING_STAYS_OFF
from kubectl_kvdtype._kits.report import Column, ObjectRef, Report
from kubectl_kvdtype._sources import model as _model
from kubectl_kvdtype._sources.kinds import DEPLOYMENT, SETTING

REBIND_COLUMNS = [
    Column("STEP", "step"),
    Column("ACTION", "action"),
    Column("OBJECT", "object"),
    Column("STATE", "state", status=True),
    Column("DETAIL", "detail"),
]


def plan_report(context: Context, plan: Plan, journal: Optional[Journal], options: RebindOptions) -> Report:
    report = plan.report
    report.columns = REBIND_COLUMNS
    if plan.blockers:
        report.add(SETTING_STAYS_OFF, ObjectRef(SETTING.name, context.system_namespace, _model.SETTING_NAME),
                   f"The Setting stays off after the move: {', '.join(plan.blockers)} would still break an engine "
                   "(kubectl kvdtype check -A says why); turn it on with kubectl kvdtype escape on once they are "
                   "fixed.",
                   blockedBy=plan.blockers)
    report.manifests = plan.manifests
    outcomes = journal.done if journal is not None else report.summary.get("outcomes", {})
    for index, step in enumerate(plan.steps, 1):
        outcome = outcomes.get(step.id)
        report.items.append({
            "step": index, "id": step.id, "action": step.action.word,
            "object": f"{step.kind} {step.namespace}/{step.name}", "kind": step.kind,
            "namespace": step.namespace, "name": step.name,
            "state": outcome or "planned", "detail": step.detail,
        })
    mode = _mode(options, journal)
    report.summary = {
        "mode": mode, "namespace": plan.namespace, "binding": plan.binding, **plan.names.to_dict(),
        "backupDir": str(journal.directory) if journal is not None else None,
        "settingBlockedBy": plan.blockers, "newObjects": plan.manifests,
        "done": sum(1 for s in plan.steps if s.id in outcomes), "steps": len(plan.steps),
    }
    report.headline = _rebind_headline(plan, journal, mode)
    return report


def _mode(options: RebindOptions, journal: Optional[Journal]) -> str:
    if options.dry_run != "none":
        return f"dry-run-{options.dry_run}"
    if journal is not None and journal.finished:
        return "applied"
    return "applied" if options.apply else ("half-done" if journal is not None else "plan")


def _rebind_headline(plan: Plan, journal: Optional[Journal], mode: str) -> str:
    moved = sum(1 for s in plan.steps if s.action is Action.CREATE and s.kind == DEPLOYMENT.name)
    what = (f"move {moved} ModelDeployment(s) from Binding {plan.namespace}/{plan.binding} to "
            f"{plan.names.new_name} (dtype {plan.names.dtype}, domain {plan.names.domain_name}, "
            f"strategy {plan.names.strategy.value})")
    if mode == "plan":
        return (f"Plan only, nothing was changed: {len(plan.steps)} step(s) to {what}. Run again with --apply to carry "
                f"it out; the originals are saved first to ./kvdtype-backup-{plan.namespace}-{plan.binding}-"
                "<UTC time>/ (or --backup-dir).")
    if mode.startswith("dry-run"):
        sent = "every write was sent with dryRun=All" if mode == "dry-run-server" else "no write was sent"
        return f"Dry run: {sent} and nothing was changed. The plan would {what}."
    if mode == "half-done" and journal is not None:  # _mode says half-done only with a journal
        return (f"Half done: {len(journal.done)} of {len(plan.steps)} step(s) journaled in {journal.directory}/. "
                "Run the same command with --apply to resume, or put back what it deleted with kubectl kvdtype escape "
                f"restore {journal.directory}.")
    setting = next((journal.done.get(s.id) for s in plan.steps if s.action is Action.SETTING_ON), None) \
        if journal else None
    return (f"Done: {what}. The originals and the journal are in {journal.directory}/." if journal else "Done.") + (
        f" The Setting was {setting}." if setting and setting.startswith("left off") else "")
