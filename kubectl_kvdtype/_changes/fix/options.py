"""``find-flags --fix``'s flags, typed and checked: all that a find-flags run without ``--fix``
needs of the fix, so that the plan, the backup and the journal are imported only when ``--fix``
asks for them (``apply``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from kubectl_kvdtype._changes import managed as _managed
from kubectl_kvdtype._kits.records import record_type
from kubectl_kvdtype._kits.status import UsageError

if TYPE_CHECKING:
    from kubectl_kvdtype._commands.command import Context


@record_type(frozen=True)
class FixOptions:
    """``find-flags --fix``'s flags, typed: what the fix reads, taken by the subcommand from the
    parsed command line."""

    fix: bool
    apply: bool
    yes: bool
    #: ``none``, ``client`` or ``server``.
    dry_run: str
    accept_dtype_change: bool
    backup_dir: Optional[str]
    #: --force-managed: patch objects that Helm, Argo CD, Flux, a controller or a field manager manage.
    force_managed: bool = False


def check_options(context: Context, options: FixOptions) -> None:
    """Refuse what cannot be done before anything is read."""
    if not options.fix:
        given = [flag for flag, on in (("--apply", options.apply), ("--yes", options.yes),
                                       ("--dry-run", options.dry_run != "none"),
                                       ("--accept-dtype-change", options.accept_dtype_change),
                                       ("--backup-dir", options.backup_dir),
                                       (_managed.FORCE_MANAGED, options.force_managed)) if on]
        if given:
            raise UsageError(f"{given[0]} goes with --fix")
        return
    if context.offline and (options.apply or options.dry_run == "server"):
        raise UsageError("find-flags --fix writes to a live cluster only: with -f/--filename it plans (drop "
                         f"{'--apply' if options.apply else '--dry-run=server'}, or drop -f)")
    if options.apply and options.dry_run == "client":
        raise UsageError("--apply and --dry-run=client cannot be used together")
