"""``kubectl kvdtype find-flags``: every role, Pod and Pod template that passes the flag itself.

Replaces Step 2 of the upgrade guide, and goes further where the guide's jq filter is wrong: the
argv is read the way each engine's argparse reads it (``_engines.verdicts.read_flag``), so the longer
``--kv-cache-dtype-skip-layers`` is not a match and abbreviations are. It also looks where the guide
does not: Pods that opt into injection, and the Pod templates of the workloads that create them,
because the webhook refuses those at creation once the upgrade is in.
"""

from __future__ import annotations

import argparse

from kubectl_kvdtype._changes.fix import options as _fix_options
from kubectl_kvdtype._changes.managed import FORCE_MANAGED, FORCE_MANAGED_HELP
from kubectl_kvdtype._commands.command import APPLY_CONSENT, Command, CommonOptions, Context
from kubectl_kvdtype._judging.flags import FLAG_COLUMNS, FlagInventory, build_find_flags_report  # noqa: F401 - re-exported
from kubectl_kvdtype._judging.managed import name_managers
from kubectl_kvdtype._kits.report import Report


class FindFlagsCommand(Command):
    name = "find-flags"
    description = (
        "Roles of pool-attached ModelDeployments whose extraArgs pass --kv-cache-dtype (in any "
        "spelling their engine reads), injected Pods and opted-in Pod templates whose target "
        "container passes it. After the upgrade the operator refuses the role's next edit and the "
        "webhook refuses such Pods. Replaces Step 2 of the upgrade guide."
    )
    examples = (
        ("every role, Pod and Pod template that passes the flag", "kubectl kvdtype find-flags -A"),
        ("one namespace, with engines and owners", "kubectl kvdtype find-flags -n team-c -o wide"),
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_fix_flags(parser)

    def run(self, context: Context) -> Report:
        options = fix_options(context.options, context.common)
        _fix_options.check_options(context, options)
        inventory = FlagInventory.read(context.source, context.namespace, whole=options.fix)  # --fix backs them up
        report = build_find_flags_report(inventory)
        name_managers(report, inventory.managers_reader(context.source, context.offline))
        if not options.fix:
            return report
        from kubectl_kvdtype._changes.fix import apply as _fix  # the plan, backup and journal: only for --fix

        return _fix.fix(context, inventory, report, options)


def fix_options(flags: argparse.Namespace, common: CommonOptions) -> _fix_options.FixOptions:
    """``find-flags --fix``'s typed options, from the parsed command line (every attribute named: a
    missing one is an error); ``_changes`` never sees the namespace."""
    return _fix_options.FixOptions(fix=bool(flags.fix), apply=bool(flags.apply), yes=bool(flags.yes),
                                   dry_run=flags.dry_run, accept_dtype_change=bool(flags.accept_dtype_change),
                                   backup_dir=flags.backup_dir, force_managed=bool(flags.force_managed))


def add_fix_flags(parser: argparse.ArgumentParser) -> None:
    """``--fix`` and its companions; the fix itself lives in ``_changes.fix``."""
    fix = parser.add_argument_group("fixing (--fix)")
    fix.add_argument("--fix", action="store_true",
                     help="plan the removal of every flag found: one JSON patch per role's deployment or workload "
                          "(an injected Pod's top controller); changes nothing without --apply")
    fix.add_argument("--apply", action="store_true",
                     help=f"with --fix: back the objects up, then patch them (asks [y/N] on a terminal; "
                          f"{APPLY_CONSENT})")
    fix.add_argument("--yes", "-y", action="store_true", help="with --apply on a terminal: do not ask")
    fix.add_argument("--dry-run", nargs="?", const="client", default="none", choices=("none", "client", "server"),
                     help="with --fix: client: send nothing; server: send every patch with dryRun=All")
    fix.add_argument("--accept-dtype-change", action="store_true",
                     help="with --fix: also patch objects whose removal changes the dtype they run")
    fix.add_argument(FORCE_MANAGED, action="store_true", help=f"with --apply: {FORCE_MANAGED_HELP}")
    fix.add_argument("--backup-dir", metavar="DIR",
                     help="with --apply: where to save the originals (default ./kvdtype-backup-fix-<UTC time>/; "
                          "kubectl kvdtype escape restore DIR reverts the fix)")
