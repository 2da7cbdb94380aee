"""``guard --apply`` and ``guard --remove --apply``: the guard's policies and bindings written by
server-side apply (field manager kubectl-kvdtype), or removed, and nothing else.

Before the first write every object of the guard's names is read: one not made by the plugin, or
changed since by another field manager (``_judging.guard.foreign``), stops the whole write unless
``--force-managed`` (nothing written). Each apply carries the resourceVersion read (a precondition:
an object changed between the read and the write is answered 409, not overwritten); each delete
the uid and resourceVersion read. The one consent rule (``confirm``) is asked before any of it.
"""

from __future__ import annotations

from typing import Optional

from kubectl_kvdtype._changes.managed import FORCE_MANAGED
from kubectl_kvdtype._commands.command import Context, confirm
from kubectl_kvdtype._judging import guard as _guard
from kubectl_kvdtype._kits import signals as _signals
from kubectl_kvdtype._kits.records import record_type
from kubectl_kvdtype._kits.status import ApiError, KvdtypeError
from kubectl_kvdtype._sources import model as _model
from kubectl_kvdtype._sources.kinds import Kind


@record_type(frozen=True)
class GuardOptions:
    """guard's flags, typed at the subcommand's boundary."""

    apply: bool = False
    remove: bool = False
    enforce: bool = False
    dry_run: bool = False
    force_managed: bool = False


def kind_of(manifest: dict) -> Kind:
    return _guard.POLICY if manifest["kind"] == _guard.POLICY.name else _guard.POLICY_BINDING


def blocked(installed: _guard.Installed, manifests: list[dict], force: bool) -> list[tuple[str, str]]:
    """(object, why) for each object of the guard's names the plugin may not write without ``force``."""
    found = []
    for manifest in manifests:
        obj = installed.of(kind_of(manifest), manifest["metadata"]["name"])
        why = _guard.foreign(obj) if obj is not None else None
        if why and not force:
            found.append((f"{manifest['kind']} {manifest['metadata']['name']}", why))
    return found


def refuse_blocked(found: list[tuple[str, str]]) -> None:
    if found:
        each = "; ".join(f"{name} is {why}" for name, why in found)
        raise KvdtypeError(f"refusing to write, and nothing was changed: {each}. Run again with {FORCE_MANAGED} to "
                           "take them over (the guard's own rules replace theirs)")


def install(context: Context, installed: _guard.Installed, manifests: list[dict], options: GuardOptions) -> list[dict]:
    """Apply each manifest (policies first, then their bindings); the objects as the server answered."""
    refuse_blocked(blocked(installed, manifests, options.force_managed))
    confirm(context, f"Install the upgrade guard ({'Deny' if options.enforce else 'Warn, Audit'}) in this cluster?")
    source = context.writable_source
    written: list[dict] = []
    with _signals.in_progress("guard --apply"):
        for manifest in manifests:
            kind, name = kind_of(manifest), manifest["metadata"]["name"]
            body = _with_precondition(manifest, installed.of(kind, name))
            try:
                written.append(source.apply(kind, None, name, body, force=options.force_managed,
                                            dry_run=options.dry_run))
            except ApiError as error:
                raise _refused(error, manifest, written) from None
    return written


def remove(context: Context, installed: _guard.Installed, manifests: list[dict], options: GuardOptions) -> list[dict]:
    """Delete each guard object that exists (bindings first), each only in the version read."""
    refuse_blocked(blocked(installed, manifests, options.force_managed))
    present = [(kind_of(m), obj) for m in reversed(manifests)
               if (obj := installed.of(kind_of(m), m["metadata"]["name"])) is not None]
    if not present:
        return []
    confirm(context, "Remove the upgrade guard from this cluster?")
    source = context.writable_source
    removed: list[dict] = []
    with _signals.in_progress("guard --remove --apply"):
        for kind, obj in present:
            preconditions = {"uid": _model.dig(obj, "metadata", "uid"),
                             "resourceVersion": _model.dig(obj, "metadata", "resourceVersion")}
            try:
                removed.append(source.delete(kind, None, _model.name_of(obj), dry_run=options.dry_run,
                                             preconditions=preconditions))
            except ApiError as error:
                raise _refused(error, obj, removed) from None
    return removed


def _with_precondition(manifest: dict, existing: Optional[dict]) -> dict:
    if existing is None:
        return manifest
    version = _model.dig(existing, "metadata", "resourceVersion")
    return {**manifest, "metadata": {**manifest["metadata"], "resourceVersion": version}}


def _refused(error: ApiError, manifest: dict, done: list[dict]) -> KvdtypeError:
    """A write refused: the object, why, and what was written before it (a write never left half
    done without saying so)."""
    before = ", ".join(f"{d.get('kind', '')} {_model.name_of(d)}".strip() for d in done) or "nothing"
    changed = " (it changed since it was read: run again)" if error.code == 409 else ""
    return KvdtypeError(f"{manifest.get('kind')} {_model.name_of(manifest)}: {error.message}{changed}; written "
                        f"before it: {before}")
