"""``kubectl kvdtype guard``: the upgrade's rules as the cluster's own ValidatingAdmissionPolicies,
so that whoever applies a manifest that breaks them hears it at the moment of the apply.

Without ``--apply`` the plan: what would be installed, updated or removed, the rules' records, and
which kinds and versions the guard covers on this cluster; ``-o yaml`` the manifests themselves, for
a GitOps source. ``--apply`` installs or updates them (``_changes.guard``), ``--remove --apply``
removes exactly them, ``--enforce`` binds them with Deny in place of Warn and Audit. The rules are
``_judging.guard_rules``'; what the cluster holds, ``_judging.guard``'s (which check shares).
"""

from __future__ import annotations

import argparse

from kubectl_kvdtype._changes import guard as _writes
from kubectl_kvdtype._changes.managed import FORCE_MANAGED
from kubectl_kvdtype._commands.command import APPLY_CONSENT, Command, Context
from kubectl_kvdtype._commands.flags import add_fleet_flags
from kubectl_kvdtype._judging import guard as _guard
from kubectl_kvdtype._judging import guard_rules as _rules
from kubectl_kvdtype._kits.codes import GUARD_FOREIGN, GUARD_NOT_COVERED, GUARD_STALE, GUARD_WOULD_DENY
from kubectl_kvdtype._kits.report import Column, ObjectRef, Report, Section
from kubectl_kvdtype._kits.status import UsageError
from kubectl_kvdtype._output.render import format_named

COVERAGE_COLUMNS = [
    Column("KINDS", "kinds"),
    Column("GROUP VERSION", "groupVersion"),
    Column("COVERED", lambda row: {True: "yes", False: "no", None: "unknown"}[row["covered"]], status=True),
    Column("WHY", "why"),
]
COLUMNS = [
    Column("KIND", "kind"),
    Column("NAME", "name"),
    Column("MODE", "mode"),
    Column("ACTION", "action", status=True),
]


class GuardCommand(Command):
    name = "guard"
    description = (
        "The upgrade's rules as ValidatingAdmissionPolicies written from this plugin's engine records: a "
        "pool-attached role or an opted-in Pod or Pod template passing --kv-cache-dtype itself, a new Binding "
        "declaring auto or a dtype no engine release accepts. kubectl apply then warns whoever writes one "
        "(--enforce: refuses it). Plans by default; -o yaml prints the manifests for a GitOps source."
    )
    examples = (
        ("the plan: what would be installed, and what it covers here", "kubectl kvdtype guard"),
        ("install it (warnings only)", "kubectl kvdtype guard --apply"),
        ("the manifests, for Git", "kubectl kvdtype guard -o yaml > kvdtype-guard.yaml"),
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--apply", action="store_true",
                            help=f"install or update the guard (default: print the plan); on a terminal it asks "
                                 f"first; {APPLY_CONSENT}")
        parser.add_argument("--yes", "-y", action="store_true", help="with --apply on a terminal: do not ask")
        parser.add_argument("--remove", action="store_true",
                            help="plan (with --apply: carry out) the removal of exactly what guard installed")
        parser.add_argument("--enforce", action="store_true",
                            help="bind the policies with Deny (refuse) in place of Warn and Audit; the plan names "
                                 "what runs today whose next write it refuses")
        parser.add_argument(FORCE_MANAGED, action="store_true",
                            help="with --apply: overwrite or remove objects of the guard's names that the plugin did "
                                 "not make, or that another field manager changed since")
        parser.add_argument("--dry-run", nargs="?", const="server", default="none", choices=("none", "server"),
                            help="with --apply: send every write with dryRun=All")
        add_fleet_flags(parser)  # a plan per context; --apply writes to one cluster and is refused there

    def run(self, context: Context) -> Report:
        options = guard_options(context.options)
        if options.apply and context.offline:
            raise UsageError("guard --apply writes to a cluster: -f/--filename cannot be used with it")
        if options.remove and options.enforce:
            raise UsageError("--remove and --enforce cannot be used together")
        manifests = _rules.manifests(options.enforce)
        report = Report(kind="GuardPlan", columns=COLUMNS, empty_message="Nothing to do.")
        report.manifests = [] if options.remove else manifests
        records = _rules.fingerprint(_rules.policies())
        tables = _rules.tables_named()
        report.summary = {"records": records, "tables": tables, "failurePolicy": _rules.FAILURE_POLICY,
                          "mode": "deny" if options.enforce else "warn"}
        # -o yaml is the manifests alone (for a GitOps source): nothing of the cluster goes into them.
        alone = context.offline or (format_named(context.common.output).manifests and not options.apply
                                    and not options.remove)
        installed = _guard.Installed() if alone else _guard.read_installed(context.source)
        _plan(report, installed, manifests, options, records)
        if not alone:
            _covered(report, context)
            if options.enforce and not options.remove:
                _would_deny(report, context)
        if options.apply:
            write = _writes.remove if options.remove else _writes.install
            done = write(context, installed, manifests, options)
            for item in report.items:
                if item["action"] not in ("unchanged", "absent"):
                    item["action"] = ("removed" if options.remove else "applied") + \
                        (" (dry run)" if options.dry_run else "")
            report.summary["written"] = len(done)
        report.headline = _headline(report, options, tables)
        return report


def guard_options(flags: argparse.Namespace) -> _writes.GuardOptions:
    return _writes.GuardOptions(apply=bool(flags.apply), remove=bool(flags.remove), enforce=bool(flags.enforce),
                                dry_run=flags.dry_run == "server", force_managed=bool(flags.force_managed))


def _plan(report: Report, installed: _guard.Installed, manifests: list[dict], options: _writes.GuardOptions,
          records: str) -> None:
    mode = "Deny" if options.enforce else "Warn, Audit"
    for manifest in manifests:
        kind, name = _writes.kind_of(manifest), manifest["metadata"]["name"]
        existing = installed.of(kind, name)
        foreign = _guard.foreign(existing) if existing is not None else None
        if options.remove:
            action = "absent" if existing is None else "remove"
        elif existing is None:
            action = "create"
        else:
            action = "unchanged" if _same(existing, manifest) else "update"
        if foreign and options.force_managed:
            action += " (taken over)"
        elif foreign:
            action += " (refused without --force-managed)"
            report.add(GUARD_FOREIGN, ObjectRef(kind.name, None, name),
                       f"{kind.name} {name} is {foreign}: guard --apply leaves it unless {FORCE_MANAGED}.")
        report.items.append({"kind": kind.name, "name": name, "action": action,
                             "mode": mode if kind is _guard.POLICY_BINDING and not options.remove else ""})
    if installed.stale(records) and not options.remove:
        report.add(GUARD_STALE, ObjectRef(_guard.POLICY.name, None, _rules.ROLES),
                   f"the installed guard was written from other records (by kubectl-kvdtype {installed.version}): "
                   "--apply updates it.")


def _same(existing: dict, manifest: dict) -> bool:
    records = (existing.get("metadata", {}).get("annotations") or {}).get(_rules.RECORDS_ANNOTATION)
    return records == manifest["metadata"]["annotations"][_rules.RECORDS_ANNOTATION] \
        and existing.get("spec", {}).get("validationActions") == manifest["spec"].get("validationActions")


def _covered(report: Report, context: Context) -> None:
    rows = _guard.coverage(context.source)
    if isinstance(rows, str):
        report.warnings.append(rows)
        report.summary["coverage"] = None
        return
    report.summary["coverage"] = [row.to_dict() for row in rows]
    report.sections.append(Section("coverage", COVERAGE_COLUMNS, [row.to_dict() for row in rows]))
    for row in rows:
        if row.covered is False:
            report.add(GUARD_NOT_COVERED, ObjectRef("APIService", None, row.group_version),
                       f"{row.kinds} at {row.group_version}: not covered, {row.why}.")


def _would_deny(report: Report, context: Context) -> None:
    """What Deny refuses that runs today: each role, Pod and template find-flags finds reading the flag."""
    from kubectl_kvdtype._judging.flags import FlagInventory, build_find_flags_report

    found = build_find_flags_report(FlagInventory.read(context.source, context.namespace))
    for item in found.items:
        if not any(o.get("read") and not o.get("inShell") for o in item["occurrences"]):
            continue
        ref = ObjectRef(item["kind"], item["namespace"], item["name"])
        what = f"role {item['role']}'s next edit" if item["role"] else (
            "its replacement" if item["kind"] == "Pod" else "every new Pod it creates (FailedCreate)")
        report.add(GUARD_WOULD_DENY, ref, f"{ref}: --enforce refuses {what}, since it passes --kv-cache-dtype at "
                                          f"{', '.join(item['where'])}; kubectl kvdtype find-flags --fix removes it.")


def _headline(report: Report, options: _writes.GuardOptions, tables: list[str]) -> str:
    records = "the shipped engine records" + (f" and the added tables {', '.join(tables)}" if tables else "")
    done = "Sent with dryRun=All (nothing persisted):" if options.dry_run else ""
    if options.remove:
        verb = (f"{done} removed" if done else "Removed") if options.apply else "Would remove"
        return f"{verb} the upgrade guard's {sum(1 for i in report.items if i['action'] != 'absent')} object(s)."
    verb = (f"{done} applied" if done else "Applied") if options.apply else "Would apply"
    mode = "Deny: refusing" if options.enforce else "Warn and Audit: warning of"
    return (f"{verb} the upgrade guard ({mode} writes that break the upgrade's rules), written from {records} "
            f"(fingerprint {report.summary['records']}); failurePolicy {_rules.FAILURE_POLICY}.")
