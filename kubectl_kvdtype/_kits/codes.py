"""Every finding code, in one table: its severity, what it means, which subcommands report it.

Like popeye's codes table, this is the only place a code is defined. ``Report.add`` takes the
severity from here (no call site chooses it), ``Command.codes`` and ``--ignore`` accept exactly the
codes a subcommand is listed for, completion offers them, and ``docs/codes.md`` and the man page's
FINDING CODES section are generated from it (``scripts/codes-table``, ``scripts/build-binary
--man``; tests/test_codes.py fails when a report emits a code not listed for its subcommand, or
when a table drifts).
"""

from __future__ import annotations

from typing import Optional

from kubectl_kvdtype._kits.records import record_type

ERROR = "error"
WARNING = "warning"
INFO = "info"

CHECK, FIND_FLAGS, VERIFY, ESCAPE, PREFLIGHT = "check", "find-flags", "verify", "escape", "preflight"
GUARD = "guard"

# check
DTYPE_REJECTED = "dtype-rejected"
DTYPE_AUTO = "dtype-auto"
DTYPE_UNKNOWN = "dtype-unknown"
BINDING_UNUSED = "binding-unused"
BINDING_MISSING = "binding-missing"
ENGINE_UNKNOWN = "engine-unknown"
VERSION_UNRECORDED = "engine-version-unrecorded"
TABLE_ADDED = "engine-table-added"
# find-flags
ROLE_FLAG = "role-flag"
POD_FLAG = "pod-flag"
KIND_NOT_EXAMINED = "kind-not-examined"
ARGV_TOO_LONG = "argv-too-long"
# verify
REPLICA_MISSING = "replica-missing-flag"
REPLICA_MISMATCH = "replica-dtype-mismatch"
REPLICA_REJECTED = "replica-dtype-rejected"
REPLICA_NOT_ROLLED = "replica-not-rolled"
POD_MISSING = "pod-missing-flag"
POD_MISMATCH = "pod-dtype-mismatch"
POD_REJECTED = "pod-dtype-rejected"
ROLE_UNMANAGED = "role-unmanaged"
NOT_ATTACHED = "deployment-not-attached"
# escape
MANUAL_STEP = "manual-step"
NAME_CHANGE = "name-change"
SETTING_STAYS_OFF = "setting-stays-off"
SETTING_MISSING = "setting-missing"
RESTORE_BREAKS = "restore-breaks"
# find-flags --fix (and escape restore of a fix)
FIX_MANUAL = "fix-manual"
FIX_REFUSED = "fix-refused"
FIX_CONFLICT = "fix-conflict"
RESTORE_CONFLICT = "restore-conflict"
# every write (escape rebind, escape restore, find-flags --fix)
MANAGED_OBJECT = "managed-object"
# preflight (which also reports every code of check and find-flags)
PREDICTED_FAILURE = "predicted-failure"
PREDICTED_DEPENDS = "predicted-depends"
# guard (and check, which preflight shares: whether one is installed)
GUARD_INSTALLED = "guard-installed"
GUARD_STALE = "guard-stale"
GUARD_NOT_COVERED = "guard-not-covered"
GUARD_WOULD_DENY = "guard-would-deny"
GUARD_FOREIGN = "guard-foreign"
# every subcommand that reads manifests (-f)
DUPLICATE_OBJECT = "duplicate-object"
# every subcommand that reads objects (-f or a cluster)
INVALID_NAME = "invalid-name"


@record_type(frozen=True)
class Code:
    """One finding code. ``escalated`` is the severity it takes when a wait gives up on it."""

    code: str
    severity: str
    meaning: str
    emitted_by: tuple[str, ...]
    escalated: Optional[str] = None

    @property
    def severity_text(self) -> str:
        """The severity as the docs write it: ``warning (error when --wait gives up)``."""
        return self.severity + (f" ({self.escalated} when --wait gives up)" if self.escalated else "")


_ALL = (CHECK, FIND_FLAGS, VERIFY, ESCAPE, PREFLIGHT, GUARD)

#: The registry, in the order the docs list it.
CODES: tuple[Code, ...] = (
    Code(DTYPE_REJECTED, ERROR, "an engine consuming the Binding rejects its dtype spelling", (CHECK,)),
    Code(DTYPE_AUTO, WARNING, "the Binding says auto, which a new Binding may not declare after the upgrade", (CHECK,)),
    Code(DTYPE_UNKNOWN, WARNING, "the dtype is not in the table for a consumer's engine, or the Binding has no "
                                 "dtype (escape rebind: a --force-unknown-dtype spelling)", (CHECK, VERIFY, ESCAPE)),
    Code(BINDING_UNUSED, INFO, "nothing consumes the Binding", (CHECK,)),
    Code(BINDING_MISSING, ERROR, "a ModelDeployment or injected Pod names a Binding that does not exist",
         (CHECK, VERIFY)),
    Code(ENGINE_UNKNOWN, WARNING, "a consumer's engine is neither vLLM nor SGLang, so its dtype is not judged",
         (CHECK,)),
    Code(VERSION_UNRECORDED, INFO, "a consumer's engine version is no recorded release (or is unreadable): it is "
                                   "judged with the recorded parser named, the value by the hand-kept spelling table",
         (CHECK, VERIFY)),
    Code(TABLE_ADDED, INFO, "a consumer's verdict rests on an engine table added for the run "
                            "(KUBECTL_KVDTYPE_ENGINE_TABLES), not on the tables this release ships", (CHECK, VERIFY)),
    Code(ROLE_FLAG, ERROR, "a role of a pool-attached ModelDeployment passes --kv-cache-dtype in its extraArgs",
         (FIND_FLAGS,)),
    Code(POD_FLAG, ERROR, "an injected Pod or an opted-in workload template passes --kv-cache-dtype itself",
         (FIND_FLAGS,)),
    Code(KIND_NOT_EXAMINED, WARNING, "a kind whose objects could change the verdict (a workload kind's Pod templates, "
                                     "the Setting verify judges by) could not be read (403, or 404 on a served "
                                     "group): the run is incomplete (exit 4, preflight INCOMPLETE)",
         (FIND_FLAGS, VERIFY)),
    Code(ARGV_TOO_LONG, WARNING, "a role's extraArgs or a container's argv is longer than the tool reads: not "
                                 "parsed, so whether it passes --kv-cache-dtype is unknown", (FIND_FLAGS, VERIFY)),
    Code(REPLICA_REJECTED, ERROR, "the engine refuses the replica's argv, so it never serves", (VERIFY,)),
    Code(REPLICA_MISSING, ERROR, "the replica carries no flag the engine reads", (VERIFY,)),
    Code(REPLICA_MISMATCH, ERROR, "the replica's effective dtype differs from its Binding's", (VERIFY,)),
    Code(REPLICA_NOT_ROLLED, WARNING, "the right value, from the role's own copy only: the rollout has not "
                                      "replaced the replica yet", (VERIFY,), escalated=ERROR),
    Code(POD_REJECTED, ERROR, "the engine refuses the injected Pod's argv", (VERIFY,)),
    Code(POD_MISSING, ERROR, "the injected Pod carries no flag in its target container's args, or has no target "
                             "container", (VERIFY,)),
    Code(POD_MISMATCH, ERROR, "the injected Pod's effective dtype differs from its Binding's", (VERIFY,)),
    Code(ROLE_UNMANAGED, INFO, "a take-over role (command set): the operator adds no flag, its Pods are not judged",
         (VERIFY,)),
    Code(NOT_ATTACHED, WARNING, "verify NAME on a ModelDeployment without spec.kvCache: nothing to verify",
         (VERIFY,)),
    Code(MANUAL_STEP, WARNING, "injected Pods name the old Binding: their owner's annotation must be changed by hand",
         (ESCAPE,)),
    Code(NAME_CHANGE, WARNING, "--strategy side-by-side renames the moved ModelDeployments", (ESCAPE,)),
    Code(SETTING_STAYS_OFF, WARNING, "after the move the Setting stays off: other Bindings would still break an "
                                     "engine", (ESCAPE,)),
    Code(SETTING_MISSING, INFO, "there is no Setting (an operator older than the feature): the plan does not switch it",
         (ESCAPE,)),
    Code(RESTORE_BREAKS, WARNING, "escape restore recreates a Binding whose dtype an engine rejects while the "
                                  "Setting is on", (ESCAPE,)),
    Code(FIX_MANUAL, ERROR, "find-flags --fix: a copy of the flag it cannot remove by itself (no owner, a Job, a "
                            "shell string...): a manual step", (FIND_FLAGS,)),
    Code(FIX_REFUSED, ERROR, "find-flags --fix: removing the flag would change the dtype the object runs "
                             "(--accept-dtype-change to allow)", (FIND_FLAGS,)),
    Code(FIX_CONFLICT, ERROR, "find-flags --fix: the object changed since it was read; nothing was written there",
         (FIND_FLAGS,)),
    Code(RESTORE_CONFLICT, ERROR, "escape restore of a fix: the object changed since the fix patched it; nothing "
                                  "was written there", (ESCAPE,)),
    Code(MANAGED_OBJECT, WARNING, "a write would delete, recreate or patch an object that Helm, Argo CD, Flux, a "
                                  "controller or another field manager manages: --apply refuses it (exit 3) unless "
                                  "--force-managed, which the finding says who will put the change back",
         (ESCAPE, FIND_FLAGS)),
    Code(PREDICTED_FAILURE, ERROR, "preflight's dry run of the upgrade: a replica will fail to start, and no check "
                                   "or find-flags error covers it", (PREFLIGHT,)),
    Code(PREDICTED_DEPENDS, WARNING, "preflight's dry run of the upgrade: what a replica starts with depends on a "
                                     "variable the object does not set (a shell line's ${V:-w}, envFrom, valueFrom)",
         (PREFLIGHT,)),
    Code(GUARD_INSTALLED, INFO, "the upgrade guard (kubectl kvdtype guard) is installed: its mode, and which "
                                "kubectl-kvdtype wrote it", (CHECK,)),
    Code(GUARD_STALE, WARNING, "the installed guard's rules were written from other engine records than this "
                               "plugin's: guard --apply updates them", (CHECK, GUARD)),
    Code(GUARD_NOT_COVERED, WARNING, "a group version the guard's rules are about is served by an aggregated API "
                                     "server (or not at all): kube-apiserver's policies do not see its writes; "
                                     "find-flags and check in CI hold it", (GUARD,)),
    Code(GUARD_WOULD_DENY, WARNING, "guard --enforce: the guard in Deny mode refuses the next write of an object "
                                    "that runs today (an opted-in workload's next Pods, a role's next edit)",
         (GUARD,)),
    Code(GUARD_FOREIGN, ERROR, "an object of the guard's name was not made by the plugin, or was changed by "
                               "another field manager since: --apply and --remove leave it unless --force-managed",
         (GUARD,)),
    Code(DUPLICATE_OBJECT, WARNING, "-f read the same object twice with different bodies; the one read last is "
                                    "judged", _ALL),
    Code(INVALID_NAME, ERROR, "an object read (-f, or a cluster's answer) has a name or namespace the API server "
                              "refuses for its kind: it is not judged, and no command is built from it", _ALL),
)

BY_CODE: dict[str, Code] = {entry.code: entry for entry in CODES}


def lookup(code: str) -> Code:
    """The registry entry of ``code``; an unregistered code is a bug, named as one."""
    try:
        return BY_CODE[code]
    except KeyError:
        raise KeyError(f"finding code {code!r} is not in the registry (kubectl_kvdtype/_kits/codes.py)") from None


def severity_of(code: str) -> str:
    return lookup(code).severity


def codes_of(command: str) -> tuple[str, ...]:
    """The codes ``command`` may report, which its ``--ignore`` accepts (preflight reports what
    check and find-flags report, and its own)."""
    emitters = {command, CHECK, FIND_FLAGS} if command == PREFLIGHT else {command}
    return tuple(entry.code for entry in CODES if emitters & set(entry.emitted_by))


def known() -> list[str]:
    """Every code, sorted: what ``--ignore`` accepts and completion offers."""
    return sorted(BY_CODE)


def markdown_table() -> str:
    """``docs/codes.md``: the registry as a Markdown table (scripts/codes-table writes it)."""
    lines = [
        "<!-- Generated from kubectl_kvdtype/_kits/codes.py by scripts/codes-table; do not edit by hand. -->",
        "# Finding codes",
        "",
        "Every finding a report can carry. `--ignore CODE` (repeatable) drops a code's findings before",
        "the exit status is decided; it accepts any code below.",
        "",
        "| code | severity | subcommands | meaning |",
        "|---|---|---|---|",
    ]
    for entry in CODES:
        lines.append(f"| `{entry.code}` | {entry.severity_text} | {', '.join(entry.emitted_by)} | {entry.meaning} |")
    return "\n".join(lines) + "\n"

