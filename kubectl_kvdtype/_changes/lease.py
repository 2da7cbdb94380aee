"""One ``escape rebind --apply`` per Binding: a lease kept in an annotation on the Binding.

Two rebinds of one Binding at once (two terminals, a CI retry) would each resume or redo the
other's steps. So before its first write a run takes the lease: an annotation on the Binding that
names the holder (host, pid, journal path) and an expiry the run renews while it works, written
with the resourceVersion just read, so that of two runs taking it at once one gets a 409. A second
run refuses at once, naming the holder. A lease whose expiry has passed, or whose holder is a
process of this host that no longer exists, was left by a crashed run and is taken over. An
annotation that is no lease this tool wrote (not JSON, too long, nested deep, no expiry, a pid no
process has) is not taken over blindly: the run refuses, naming the ``kubectl annotate`` command
that clears it, before its first write.
"""

from __future__ import annotations

import datetime
import json
import os
import shlex
import socket
import time
from pathlib import Path
from typing import Optional

from kubectl_kvdtype._kits import bounded as _bounded
from kubectl_kvdtype._kits.records import record_type
from kubectl_kvdtype._kits.status import Conflict, KvdtypeError, NotFound
from kubectl_kvdtype._sources import model as _model
from kubectl_kvdtype._sources.kinds import BINDING, Source, WritableSource

LEASE_ANNOTATION = "kvdtype.gpustack.ai/lease"
#: How long a lease lasts unrenewed; a run renews it once half of it has passed.
LEASE_SECONDS = 120.0
_ATTEMPTS = 3
#: The longest annotation read as a lease: the record this tool writes is a few hundred characters
#: (its journal path included); anything longer is no lease of ours.
MAX_LEASE_CHARS = 8192
#: The largest process id a system gives (Linux's pid_max ceiling, 2**22).
MAX_PID = 4_194_304
#: How much of a value read from the annotation a message repeats.
_SHOWN = 300


def _utc(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _seconds(text: object) -> Optional[float]:
    try:
        moment = datetime.datetime.strptime(str(text), "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return None
    return moment.replace(tzinfo=datetime.timezone.utc).timestamp()


class Unreadable(Exception):
    """The lease annotation is no lease this tool wrote; the message says why, never its value."""


def holder_of(binding: Optional[dict]) -> Optional[dict]:
    """The lease recorded on ``binding``, None when there is none. An untrusted annotation: one
    that is no lease this tool wrote raises ``Unreadable``, saying why."""
    raw = _model.annotations_of(binding or {}).get(LEASE_ANNOTATION)
    if raw is None:
        return None
    if not isinstance(raw, str) or len(raw) > MAX_LEASE_CHARS:
        raise Unreadable(f"{len(raw) if isinstance(raw, str) else 'no'} characters of text, more than a lease holds")
    try:
        lease = _bounded.loads(raw)
    except (ValueError, RecursionError):
        raise Unreadable("it is not a JSON lease record") from None
    if not isinstance(lease, dict):
        raise Unreadable("it is not a JSON lease record")
    if _seconds(lease.get("expires")) is None:
        raise Unreadable("it has no expiry a lease of this tool has")
    pid = lease.get("pid")
    if pid is not None and (type(pid) is not int or not 0 < pid <= MAX_PID):
        raise Unreadable(f"its pid {_short(pid)} is no process id")
    return lease


def _short(value: object) -> str:
    """A value read from the annotation, as a message may repeat it: cut to a few words."""
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}... ({len(text)} characters)"


def _abandoned(lease: dict, now: float) -> bool:
    """Left by a run that ended without giving it back: expired, or its process here is gone."""
    expires = _seconds(lease.get("expires"))
    if expires is None or expires <= now:
        return True
    if lease.get("host") != socket.gethostname() or type(lease.get("pid")) is not int:
        return False
    try:
        os.kill(lease["pid"], 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OSError):
        return False
    return False


@record_type
class Lease:
    """The lease this run holds on one Binding."""

    source: WritableSource
    namespace: str
    binding: str
    journal: Path
    expires: float = 0.0

    @property
    def record(self) -> dict:
        host = socket.gethostname()
        return {"holder": f"{host} pid {os.getpid()}", "host": host, "pid": os.getpid(),
                "journal": str(self.journal.resolve()), "expires": _utc(self.expires)}

    def ours(self, lease: Optional[dict]) -> bool:
        return lease is not None and lease.get("host") == socket.gethostname() and lease.get("pid") == os.getpid()

    # --- taking, renewing, giving back -------------------------------------------------------------

    def acquire(self) -> "Lease":
        """Take the lease, or refuse (exit 3, nothing written) naming who holds it."""
        for _ in range(_ATTEMPTS):
            binding = self.source.get(BINDING, self.namespace, self.binding)
            if binding is None:
                return self  # nothing left to hold (the old Binding is gone: the rebind is nearly done)
            try:
                held = holder_of(binding)
            except Unreadable as why:
                raise KvdtypeError(self._unreadable(str(why))) from None
            if held and not self.ours(held) and not _abandoned(held, time.time()):
                raise KvdtypeError(held_refusal(self.namespace, self.binding, held))
            if self._write(binding, time.time() + LEASE_SECONDS):
                return self
        raise KvdtypeError(f"the KVCachePoolBinding {self.namespace}/{self.binding} kept changing while its lease "
                           "was taken; nothing was changed: run the command again")

    def renew(self) -> None:
        """Push the expiry on once half of it has passed; stop the run if another took the lease."""
        if time.time() < self.expires - LEASE_SECONDS / 2:
            return
        for _ in range(_ATTEMPTS):
            binding = self.source.get(BINDING, self.namespace, self.binding)
            if binding is None:
                return
            try:
                held = holder_of(binding)
            except Unreadable as why:
                raise KvdtypeError(f"the lease on the KVCachePoolBinding {self.namespace}/{self.binding} was "
                                   f"overwritten ({why}): this run stops so that two runs do not mix") from None
            if held and not self.ours(held):
                raise KvdtypeError(f"another run took over the lease on the KVCachePoolBinding {self.namespace}/"
                                   f"{self.binding} ({_describe(held)}): this run stops so that the two do not mix")
            if self._write(binding, time.time() + LEASE_SECONDS):
                return

    def release(self) -> None:
        """Give the lease back (best effort: a lease not given back lapses at its expiry)."""
        try:
            binding = self.source.get(BINDING, self.namespace, self.binding)
            if binding is not None and self.ours(holder_of(binding)):
                self._patch(binding, None)
        except (KvdtypeError, Unreadable, KeyboardInterrupt):
            pass

    def _write(self, binding: dict, expires: float) -> bool:
        """The annotation, written only over the version read; False when it changed meanwhile."""
        self.expires = expires
        try:
            self._patch(binding, json.dumps(self.record, sort_keys=True))
        except Conflict:
            return False
        except NotFound:
            return True
        return True

    def _patch(self, binding: dict, value: Optional[str]) -> None:
        patch = {"metadata": {"resourceVersion": _model.dig(binding, "metadata", "resourceVersion"),
                              "annotations": {LEASE_ANNOTATION: value}}}
        self.source.merge_patch(BINDING, self.namespace, self.binding, patch)


    def _unreadable(self, why: str) -> str:
        return (f"the KVCachePoolBinding {self.namespace}/{self.binding} carries a {LEASE_ANNOTATION} annotation that "
                f"is no lease this tool wrote ({why}), so whether another escape rebind of it is running cannot be "
                "told; nothing was changed. If none is, clear it with: "
                f"{clear_command(self.namespace, self.binding)} (then run this command again)")


def running_holder(source: Source, namespace: str, binding: str) -> Optional[dict]:
    """The lease of another run still under way on the Binding (None: none, or one that lapsed or
    cannot be read), read without writing: a refusal that names a running rebind says so first."""
    try:
        held = holder_of(source.get(BINDING, namespace, binding))
    except Unreadable:
        return None
    mine = held is not None and held.get("host") == socket.gethostname() and held.get("pid") == os.getpid()
    return held if held and not mine and not _abandoned(held, time.time()) else None


def held_refusal(namespace: str, binding: str, held: dict) -> str:
    """Another run holds the lease: wait, or (if it was killed) clear it."""
    return (f"another escape rebind of {namespace}/{binding} is running ({_describe(held)}): wait for it to finish; "
            f"nothing was changed. If that run was killed, its lease lapses at {_short(held.get('expires'))}, or take "
            f"it over now with: {clear_command(namespace, binding)} (then run this command again: it resumes the "
            "journal named)")


def clear_command(namespace: str, binding: str) -> str:
    """The one command that removes the lease annotation (the names are ones the API server
    accepts, checked before any request; quoted all the same)."""
    return f"kubectl annotate kvcachepoolbinding {shlex.quote(binding)} -n {shlex.quote(namespace)} {LEASE_ANNOTATION}-"


def _describe(held: dict) -> str:
    return (f"holder {_short(held.get('holder') or 'unknown')}, journal {_short(held.get('journal') or 'unknown')}, "
            f"lease until {_short(held.get('expires') or 'unknown')}")
