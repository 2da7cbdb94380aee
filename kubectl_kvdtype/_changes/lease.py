"""One ``escape rebind --apply`` per Binding: a lease kept in an annotation on the Binding.

Two rebinds of one Binding at once (two terminals, a CI retry) would each resume or redo the
other's steps. So before its first write a run takes the lease: an annotation on the Binding that
names the holder (host, pid, journal path) and an expiry the run renews while it works, written
with the resourceVersion just read, so that of two runs taking it at once one gets a 409. A second
run refuses at once, naming the holder. A lease whose expiry has passed, or whose holder is a
process of this host that no longer exists, was left by a crashed run and is taken over.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from kubectl_kvdtype._kits import bounded as _bounded
from kubectl_kvdtype._kits.status import Conflict, KvdtypeError, NotFound
from kubectl_kvdtype._sources import model as _model
from kubectl_kvdtype._sources.kinds import BINDING, WritableSource

LEASE_ANNOTATION = "kvdtype.gpustack.ai/lease"
#: How long a lease lasts unrenewed; a run renews it once half of it has passed.
LEASE_SECONDS = 120.0
_ATTEMPTS = 3


def _utc(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _seconds(text: object) -> Optional[float]:
    try:
        moment = datetime.datetime.strptime(str(text), "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return None
    return moment.replace(tzinfo=datetime.timezone.utc).timestamp()


def holder_of(binding: Optional[dict]) -> Optional[dict]:
    """The lease recorded on ``binding`` (an untrusted annotation: anything unreadable is None)."""
    raw = _model.annotations_of(binding or {}).get(LEASE_ANNOTATION)
    try:
        lease = _bounded.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return None
    return lease if isinstance(lease, dict) else None


def _abandoned(lease: dict, now: float) -> bool:
    """Left by a run that ended without giving it back: expired, or its process here is gone."""
    expires = _seconds(lease.get("expires"))
    if expires is None or expires <= now:
        return True
    if lease.get("host") != socket.gethostname() or not isinstance(lease.get("pid"), int):
        return False
    try:
        os.kill(lease["pid"], 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OSError):
        return False
    return False


@dataclass
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
            held = holder_of(binding)
            if held and not self.ours(held) and not _abandoned(held, time.time()):
                raise KvdtypeError(self._refusal(held))
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
            held = holder_of(binding)
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
        except (KvdtypeError, KeyboardInterrupt):
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

    def _refusal(self, held: dict) -> str:
        return (f"another escape rebind of {self.namespace}/{self.binding} is running ({_describe(held)}): wait for "
                "it to finish; nothing was changed. If that run was killed, its lease lapses at "
                f"{held.get('expires')}, or take it over now with: kubectl annotate kvcachepoolbinding {self.binding} "
                f"-n {self.namespace} {LEASE_ANNOTATION}- (then run this command again: it resumes the journal "
                "named)")


def _describe(held: dict) -> str:
    return (f"holder {held.get('holder') or 'unknown'}, journal {held.get('journal') or 'unknown'}, "
            f"lease until {held.get('expires') or 'unknown'}")
