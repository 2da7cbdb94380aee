"""``kubectl kvdtype escape``: the Setting switch, and the guided move to a corrected Binding.

Replaces the Troubleshooting section of the upgrade guide, its most dangerous part:

- ``escape status`` reads the Setting ``model-deployment-kv-cache-dtype-owned``;
- ``escape off`` / ``escape on`` flip it, after showing what it recreates and asking;
- ``escape rebind`` moves a Binding's workloads to a new Binding with a corrected dtype, as one
  planned, journaled, resumable command (the plan lives in ``_changes.journal``'s backup directory);
- ``escape restore`` puts back what such a backup directory holds (``_changes.restore``).

This module is the subcommand's command line: its actions, their flags and their typed options.
``status`` and the switch are ``_changes.switch``'s; the rebind is the ``_changes.rebind`` package;
the Setting's reads and writes, which both use, are ``_changes.setting``'s.

Nothing here prints a result: every action returns a ``Report``; refusals raise one sentence.
"""

from __future__ import annotations

import argparse

from kubectl_kvdtype._changes.journal import RestoreOptions
from kubectl_kvdtype._changes.managed import FORCE_MANAGED, FORCE_MANAGED_HELP
from kubectl_kvdtype._changes.rebind.run import rebind
from kubectl_kvdtype._changes.rebind.steps import RebindOptions, Strategy
from kubectl_kvdtype._changes.restore import restore
from kubectl_kvdtype._changes.setting import OFF, ON
from kubectl_kvdtype._changes.switch import SwitchOptions, status, switch
from kubectl_kvdtype._commands.command import APPLY_CONSENT, YES_NEEDED, Command, CommonOptions, Context
from kubectl_kvdtype._commands.flags import HelpFormatter, examples_epilog, parse_duration
from kubectl_kvdtype._kits.codes import WARNING
from kubectl_kvdtype._kits.report import Report
from kubectl_kvdtype._kits.status import UsageError
from kubectl_kvdtype._output.render import format_named

#: ``--wait`` alone: the Setting's status can lag its spec by ~30 s.
DEFAULT_WAIT = 60.0


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
            return switch(context, switch_options(context.options, OFF if action == "off" else ON))
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


def switch_options(flags: argparse.Namespace, value: str) -> SwitchOptions:
    """``escape off``'s or ``escape on``'s typed options (``value``: the one the action writes)."""
    return SwitchOptions(value=value, dry_run=flags.dry_run, wait=flags.wait)


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
    parser.add_argument("--yes", "-y", action="store_true", help=YES_NEEDED)
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
                        help="carry the plan out (default: print it, change nothing); on a terminal it asks first; "
                             f"{APPLY_CONSENT}")
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
                        help="create the missing objects (default: print the plan, change nothing); on a terminal it "
                             f"asks first when a restored Binding breaks its consumers; {APPLY_CONSENT}")
    parser.add_argument("--yes", "-y", action="store_true", help="with --apply on a terminal: do not ask")
    parser.add_argument(FORCE_MANAGED, action="store_true", help=f"with --apply: {FORCE_MANAGED_HELP}")
    _dry_run_flag(parser)
