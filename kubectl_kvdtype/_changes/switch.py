"""``escape status``, ``escape off`` and ``escape on``: the Setting, read, and switched safely.

``status`` says the Setting's two values and what the value in force does to the cluster;
``switch`` shows what flipping it recreates, asks (``confirm``), writes once with the
resourceVersion read, reads it back and, with ``--wait``, polls until the operator applies it,
the whole command within the wait's deadline whatever the server does (``WaitClock``). The
Setting's reads and writes themselves are ``_changes.setting``'s, which ``escape rebind`` shares.
"""

from __future__ import annotations

from typing import Optional

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
from kubectl_kvdtype._commands.command import Context, confirm
from kubectl_kvdtype._judging.bindings import BindingInventory, build_check_report
from kubectl_kvdtype._kits import signals as _signals
from kubectl_kvdtype._kits.records import record_type
from kubectl_kvdtype._kits.report import Column, Report
from kubectl_kvdtype._kits.status import ApiError, KvdtypeError
from kubectl_kvdtype._sources import model as _model

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
SWITCH_COLUMNS = [
    Column("NAME", "name"),
    Column("BEFORE", "before"),
    Column("REQUESTED", "requested"),
    Column("IN FORCE", "inForce", status=True),
    Column("RESULT", "result"),
    *COUNT_COLUMNS,
]


@record_type(frozen=True)
class SwitchOptions:
    """escape off/on's own flags, typed, read from the parsed command line at this boundary (``--yes``
    is ``CommonOptions``': the one confirmation rule reads it)."""

    #: The value written: ``OFF`` or ``ON``, from the action's name.
    value: str
    dry_run: str
    wait: Optional[float]


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
