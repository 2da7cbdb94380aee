"""``kubectl kvdtype escape``: the Setting switch, and the guided move to a corrected Binding.

Replaces the Troubleshooting section of the upgrade guide, its most dangerous part:

- ``escape status`` reads the Setting ``model-deployment-kv-cache-dtype-owned``;
- ``escape off`` / ``escape on`` flip it, after showing what it recreates and asking;
- ``escape rebind`` moves a Binding's workloads to a new Binding with a corrected dtype, as one
  planned, journaled, resumable command (the plan lives in ``_changes.journal``'s backup directory);
- ``escape restore`` puts back what such a backup directory holds (``_changes.restore``).

This module is the subcommand: its command line, ``status`` and the switch. The rebind planner,
executor and resumer are in ``_changes.rebind``; the Setting's reads and writes, which both use, in
``_changes.setting``.

Nothing here prints a result: every action returns a ``Report``; refusals raise one sentence.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Optional

from kubectl_kvdtype._changes.journal import RestoreOptions
from kubectl_kvdtype._changes.managed import FORCE_MANAGED, FORCE_MANAGED_HELP
from kubectl_kvdtype._changes.rebind.run import rebind
from kubectl_kvdtype._changes.rebind.steps import RebindOptions, Strategy
from kubectl_kvdtype._changes.restore import restore
from kubectl_kvdtype._changes.setting import (
    OFF,
    ON,
    WaitClock,
    attached_counts,
    blockers_of,
    require_setting,
    wait_for_setting,
    write_setting,
)
from kubectl_kvdtype._commands.command import Command, CommonOptions, Context, confirm
from kubectl_kvdtype._commands.flags import HelpFormatter, examples_epilog, parse_duration
from kubectl_kvdtype._judging.judgement import BindingInventory, build_check_report
from kubectl_kvdtype._kits import signals as _signals
from kubectl_kvdtype._kits.codes import WARNING
from kubectl_kvdtype._kits.report import Column, Report
from kubectl_kvdtype._kits.status import ApiError, KvdtypeError, UsageError
from kubectl_kvdtype._output.render import format_named
from kubectl_kvdtype._sources import model as _model

#: ``--wait`` alone: the Setting's status can lag its spec by ~30 s.
DEFAULT_WAIT = 60.0


# --- The command line ------------------------------------------------------------------------

class EscapeCommand(Command):
    name = "escape"
    description = (
        "Replaces the Troubleshooting section of the upgrade guide. 'status' shows the Setting "
        "model-deployment-kv-cache-dtype-owned; 'off'/'on' flip it safely; 'rebind' moves a "
        "Binding's ModelDeployments to a new Binding with a corrected dtype (plan by default, "
        "--apply to carry it out, resumable)."
    )
    examples = (
        ("is the dtype rendered and enforced now?", "kubectl kvdtype escape status"),
        ("stop rendering it while you fix things", "kubectl kvdtype escape off --yes --wait"),
        ("move a rejected Binding's deployments to a corrected one (plan first)",
         "kubectl kvdtype escape rebind legacy -n team-a --dtype bfloat16"),
    )
    #: Each action's --help examples.
    ACTION_EXAMPLES = {
        "status": (("the Setting and what it means", "kubectl kvdtype escape status"),
                   ("as JSON", "kubectl kvdtype escape status -o json")),
        "off": (("turn it off and wait until the operator applies it", "kubectl kvdtype escape off --yes --wait"),
                ("see what would be written", "kubectl kvdtype escape off --dry-run")),
        "on": (("turn it back on once preflight says GO", "kubectl kvdtype escape on --yes --wait"),
               ("send the write with dryRun=All", "kubectl kvdtype escape on --dry-run=server")),
        "rebind": (("the plan (nothing is changed)", "kubectl kvdtype escape rebind legacy -n team-a --dtype bfloat16"),
                   ("carry it out (a rerun resumes)",
                    "kubectl kvdtype escape rebind legacy -n team-a --dtype bfloat16 --apply"),
                   ("the new objects as manifests, for GitOps",
                    "kubectl kvdtype escape rebind legacy -n team-a --dtype bfloat16 -o yaml > rebind.yaml")),
        "restore": (("what would be recreated",
                     "kubectl kvdtype escape restore ./kvdtype-backup-team-a-legacy-20261129T162414Z"),
                    ("recreate it",
                     "kubectl kvdtype escape restore ./kvdtype-backup-team-a-legacy-20261129T162414Z --apply")),
    }

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="escape_action", metavar="<action>", title="actions", required=True)
        for name, help_text, add in (
            ("status", "show the Setting: requested value, value in force, what it means", _status_flags),
            ("off", "turn the Setting off: nothing rendered, nothing refused", _switch_flags),
            ("on", "turn the Setting on: every Binding's dtype rendered as --kv-cache-dtype", _switch_flags),
            ("rebind", "move a Binding's workloads to a new Binding with a corrected dtype", _rebind_flags),
            ("restore", "put back the objects a rebind's backup directory holds that no longer exist",
             _restore_flags),
        ):
            sub = actions.add_parser(name, help=help_text, description=help_text, prog=f"{parser.prog} {name}",
                                     formatter_class=HelpFormatter, epilog=examples_epilog(self.ACTION_EXAMPLES[name]))
            add(sub)

    def run(self, context: Context) -> Report:
        action: str = context.options.escape_action
        if context.offline and action != "status":
            raise UsageError(f"escape {action} changes a live cluster: -f/--filename cannot be used with it")
        if action == "status":
            return status(context)
        if action in ("off", "on"):
            return switch(context, SwitchOptions.of(context.options, OFF if action == "off" else ON))
        if action == "restore":
            return _warned(restore(context, restore_options(context.options, context.common)), context.common)
        options = rebind_options(context.options, context.common)
        if options.suffix is not None and options.strategy is not Strategy.SIDE_BY_SIDE:
            raise UsageError("--suffix names the copies that --strategy side-by-side creates: "
                             "add --strategy side-by-side, or drop --suffix")
        return _warned(rebind(context, options), context.common)


def _warned(report: Report, common: CommonOptions) -> Report:
    """A plan read by a program (``-o yaml`` into a GitOps pipe) still says each of its warning
    findings on stderr, one line each, where the person running the pipe sees them (a table shows them)."""
    if format_named(common.output).machine_readable:
        report.warnings += [f"{f.code}: {f.message}" for f in report.findings
                            if f.severity == WARNING and f.code not in common.ignore]
    return report


def rebind_options(flags: argparse.Namespace, common: CommonOptions) -> RebindOptions:
    """``escape rebind``'s typed options, from the parsed command line (every attribute named: a
    missing one is an error); ``_changes`` never sees the namespace."""
    return RebindOptions(binding=flags.binding, dtype=flags.dtype, new_name=flags.new_name,
                         domain_name=flags.domain_name,
                         strategy=Strategy(flags.strategy) if flags.strategy else None, suffix=flags.suffix,
                         keep_old_binding=bool(flags.keep_old_binding),
                         force_unknown_dtype=bool(flags.force_unknown_dtype), apply=bool(flags.apply),
                         dry_run=flags.dry_run, backup_dir=flags.backup_dir,
                         all_namespaces=common.all_namespaces, force_managed=bool(flags.force_managed))


def restore_options(flags: argparse.Namespace, common: CommonOptions) -> RestoreOptions:
    """``escape restore``'s typed options, from the parsed command line."""
    return RestoreOptions(directory=flags.directory, apply=bool(flags.apply), dry_run=flags.dry_run,
                          force_managed=bool(flags.force_managed))


def _status_flags(parser: argparse.ArgumentParser) -> None:
    """``status`` has only the global flags."""


def _dry_run_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dry-run", nargs="?", const="client", default="none", choices=("none", "client", "server"),
                        help="client: send no write; server: send every write with dryRun=All")


def _switch_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    _dry_run_flag(parser)
    parser.add_argument("--wait", nargs="?", type=parse_duration, const=DEFAULT_WAIT, default=None,
                        metavar="DURATION",
                        help=f"wait until status.value follows (default {DEFAULT_WAIT:g}s; the operator can lag ~30s); "
                             "the whole command ends within a few seconds of it")


def _rebind_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("binding", metavar="BINDING", help="the KVCachePoolBinding whose dtype is wrong")
    parser.add_argument("--dtype", required=True, metavar="SPELLING", help="the corrected dtype")
    parser.add_argument("--new-name", metavar="NAME", help="the new Binding's name (default <binding>-<dtype>)")
    parser.add_argument("--domain-name", metavar="NAME",
                        help="the new Binding's domain.name (default <old domain>-<dtype>); must be free")
    parser.add_argument("--strategy", choices=[strategy.value for strategy in Strategy], default=None,
                        help="replace (default): keep each name, delete then create (a short outage); "
                             "side-by-side: create <name>-<suffix> first, then delete (no outage, new names)")
    parser.add_argument("--suffix", metavar="SUFFIX", help="side-by-side: the new names' suffix (default the dtype)")
    parser.add_argument("--keep-old-binding", action="store_true", help="do not delete the old Binding")
    parser.add_argument("--force-unknown-dtype", action="store_true",
                        help="use a --dtype that this tool's engine tables do not know for a moved deployment's engine")
    parser.add_argument("--apply", action="store_true",
                        help="carry the plan out (default: print it, change nothing); on a terminal it asks first")
    parser.add_argument("--yes", "-y", action="store_true", help="with --apply on a terminal: do not ask")
    parser.add_argument("--backup-dir", metavar="DIR",
                        help="where to save the originals and the journal (default "
                             "./kvdtype-backup-<namespace>-<binding>-<UTC time>/; an unfinished one there is resumed)")
    parser.add_argument(FORCE_MANAGED, action="store_true", help=f"with --apply: {FORCE_MANAGED_HELP}")
    _dry_run_flag(parser)


def _restore_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", metavar="DIR",
                        help="a backup directory written by escape rebind --apply or find-flags --fix --apply")
    parser.add_argument("--apply", action="store_true",
                        help="create the missing objects (default: print the plan, change nothing)")
    parser.add_argument("--yes", "-y", action="store_true", help="with --apply on a terminal: do not ask")
    parser.add_argument(FORCE_MANAGED, action="store_true", help=f"with --apply: {FORCE_MANAGED_HELP}")
    _dry_run_flag(parser)


# --- escape status -----------------------------------------------------------------------------

#: The last two columns of both tables: what the Setting's value in force reaches.
COUNT_COLUMNS = [
    Column("DEPLOYMENTS", lambda item: _count(item["deployments"])),
    Column("REPLICAS", lambda item: _count(item["replicas"])),
]

STATUS_COLUMNS = [
    Column("NAMESPACE", "namespace"),
    Column("NAME", "name"),
    Column("REQUESTED", "requested"),
    Column("IN FORCE", "inForce", status=True),
    Column("PENDING", lambda item: "yes" if item["pending"] else "no"),
    *COUNT_COLUMNS,
]


def status(context: Context) -> Report:
    """The Setting's two values and what the value in force does to the cluster."""
    setting = require_setting(context.source, context.system_namespace)
    requested, in_force = _model.setting_values(setting)
    report = Report(kind="EscapeStatus", columns=STATUS_COLUMNS)
    deployments, replicas = _counts(context, report)
    meaning = _meaning(in_force, deployments, replicas)
    report.items.append({
        "namespace": context.system_namespace, "name": _model.SETTING_NAME, "requested": requested,
        "inForce": in_force, "pending": requested != in_force, "deployments": deployments, "replicas": replicas,
        "meaning": meaning,
    })
    report.summary = {"setting": report.items[0]}
    report.headline = meaning + (
        f' A write is not applied yet: requested "{requested}", in force "{in_force}".'
        if requested != in_force else "")
    return report


def _counts(context: Context, report: Report) -> tuple[Optional[int], Optional[int]]:
    """(pool-attached ModelDeployments, their replicas); (None, None) and a warning when unreadable."""
    deployments, replicas, why = attached_counts(context.source)
    if why:
        report.warnings.append(f"cannot count the pool-attached ModelDeployments: {why}")
    return deployments, replicas


def _meaning(value: Optional[str], deployments: Optional[int], replicas: Optional[int]) -> str:
    scope = (f"{deployments} pool-attached ModelDeployment(s) ({replicas} replica(s))"
             if deployments is not None else "every pool-attached ModelDeployment")
    if value == ON:
        return (f'The Setting is on: every Binding\'s dtype is rendered as --kv-cache-dtype on {scope}; roles and '
                "injected Pods may not pass the flag, and new Bindings may not say auto.")
    if value == OFF:
        return (f"The Setting is off: no dtype is rendered on {scope} and nothing is refused; "
                "turning it on recreates each of those replicas.")
    return f"The Setting's value in force is unknown ({value!r}); the operator may not have reconciled it yet."


def _count(value: Optional[int]) -> str:
    return "?" if value is None else str(value)


# --- escape off / escape on ------------------------------------------------------------------------

SWITCH_COLUMNS = [
    Column("NAME", "name"),
    Column("BEFORE", "before"),
    Column("REQUESTED", "requested"),
    Column("IN FORCE", "inForce", status=True),
    Column("RESULT", "result"),
    *COUNT_COLUMNS,
]


@dataclass(frozen=True)
class SwitchOptions:
    """escape off/on's own flags, typed, read from the parsed command line at this boundary (``--yes``
    is ``CommonOptions``': the one confirmation rule reads it)."""

    #: The value written: ``OFF`` or ``ON``, from the action's name.
    value: str
    dry_run: str
    wait: Optional[float]

    @classmethod
    def of(cls, flags: argparse.Namespace, value: str) -> "SwitchOptions":
        return cls(value=value, dry_run=flags.dry_run, wait=flags.wait)


def switch(context: Context, options: SwitchOptions) -> Report:
    """Show, ask, write once with the resourceVersion read, read back, optionally wait. With --wait,
    the whole command keeps its deadline (``WaitClock``), whatever the server does."""
    value = options.value
    clock = WaitClock(options.wait)
    with clock.bounding(context.source):
        setting, report, item = _before(context, options)
        if item["before"] == value:
            return _already(context, options, report, item, clock)
        preview = _preview(context.system_namespace, item["before"], value, item["deployments"],
                           item["replicas"]) + _breaks(context, value, item)
        if options.dry_run != "none":
            return _dry_run(context, options, report, item, setting, preview)
    context.env.progress(preview)
    with clock.paused():
        confirm(context, f"Turn the Setting {'on' if value == ON else 'off'}?")
    return _write(context, options, report, item, setting, clock)


def _before(context: Context, options: SwitchOptions) -> tuple[dict, Report, dict]:
    """(the Setting, the report, its one row) as read before anything is written."""
    namespace = context.system_namespace
    setting = require_setting(context.source, namespace)
    before, in_force = _model.setting_values(setting)
    report = Report(kind="EscapeSwitch", columns=SWITCH_COLUMNS)
    deployments, replicas = _counts(context, report)
    item = {"namespace": namespace, "name": _model.SETTING_NAME, "before": before, "requested": before,
            "inForce": in_force, "result": "unchanged", "dryRun": options.dry_run,
            "deployments": deployments, "replicas": replicas}
    report.items.append(item)
    return setting, report, item


def _dry_run(context: Context, options: SwitchOptions, report: Report, item: dict, setting: dict,
             preview: str) -> Report:
    value = options.value
    if options.dry_run == "client":
        item.update(requested=value, result="would change (dry run: client, nothing sent)")
        report.headline = f"Dry run, nothing sent. {preview}"
        return _finish(report, item)
    answer = write_setting(context.writable_source, context.system_namespace, setting, value, dry_run=True)
    item.update(requested=_model.setting_values(answer)[0], result="would change (dry run: server accepted it)")
    report.headline = f"Dry run, accepted by the server and not persisted. {preview}"
    return _finish(report, item)


def _write(context: Context, options: SwitchOptions, report: Report, item: dict, setting: dict,
           clock: WaitClock) -> Report:
    """The write, then the Setting read back (with --wait: polled until its value is in force)."""
    source, namespace = context.writable_source, context.system_namespace
    if clock.remaining() <= 0:  # the reads took the whole --wait: a write now could not be waited for
        raise KvdtypeError(f"the --wait time ({clock.seconds:g}s) ran out before the write was sent (the cluster "
                           "answered slowly); nothing was written")
    value = options.value
    with _signals.in_progress(f"escape {'on' if value == ON else 'off'}"):  # a signal says whether it was written
        with clock.bounding(source):
            write_setting(source, namespace, setting, value)
        if options.wait:
            setting = wait_for_setting(source, namespace, value, clock)
        else:
            setting = require_setting(source, namespace)
    requested, in_force = _model.setting_values(setting)
    item.update(requested=requested, inForce=in_force, result="changed")
    report.headline = _written_headline(value, in_force, item["deployments"], item["replicas"])
    return _finish(report, item)


def _breaks(context: Context, value: str, item: dict) -> str:
    """Turning the Setting on renders every dtype: name the Bindings check finds an engine rejects."""
    if value != ON:
        return ""
    try:
        inventory = BindingInventory.read(context.source, None, context.system_namespace)
    except ApiError as error:
        return f" (cannot judge the Bindings first: {error.message})"
    item["rejectedBindings"] = blockers_of(build_check_report(inventory, context.system_namespace))
    if not item["rejectedBindings"]:
        return ""
    return (f" WARNING: an engine rejects the dtype of {', '.join(item['rejectedBindings'])}, so their replicas stop "
            "serving once recreated (kubectl kvdtype check -A; kubectl kvdtype escape rebind fixes them).")


def _already(context: Context, options: SwitchOptions, report: Report, item: dict, clock: WaitClock) -> Report:
    """Nothing to write; with --wait, still wait for a pending write to be applied."""
    value = options.value
    if options.wait and item["inForce"] != value and options.dry_run == "none":
        item["inForce"] = _model.setting_values(
            wait_for_setting(context.source, context.system_namespace, value, clock))[1]
    pending = item["inForce"] != value
    report.headline = (f'The Setting is already requested "{value}"; nothing was written.' +
                       (f' It is not in force yet (status.value "{item["inForce"]}"); pass --wait to wait for it.'
                        if pending else ""))
    return _finish(report, item)


def _finish(report: Report, item: dict) -> Report:
    report.summary = {"setting": dict(item)}
    return report


def _preview(namespace: str, before: Optional[str], value: str, deployments: Optional[int],
             replicas: Optional[int]) -> str:
    scope = (f"{deployments} pool-attached ModelDeployment(s), {replicas} replica(s)"
             if deployments is not None else "count unknown")
    effect = "loses its --kv-cache-dtype flag" if value == OFF else "gets its Binding's dtype as --kv-cache-dtype"
    return (f'Setting {namespace}/{_model.SETTING_NAME}: "{before}" -> "{value}". Every pool-attached replica '
            f"{effect} and is recreated at its deployment's next reconcile ({scope}).")


def _written_headline(value: str, in_force: Optional[str], deployments: Optional[int], replicas: Optional[int]) -> str:
    text = f'The Setting is now requested "{value}"; in force: "{in_force}".'
    if in_force != value:
        text += " The operator applies it within ~30 s (pass --wait to wait for it)."
    if deployments is not None:
        text += (f" {deployments} pool-attached ModelDeployment(s) ({replicas} replica(s)) are recreated at "
                 "their next reconcile.")
    return text


