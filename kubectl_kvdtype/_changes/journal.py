"""The backup directory of ``escape rebind --apply``: the saved originals and the journal.

A rebind deletes workloads, so before its first write every object it will delete or change is
saved, as read, in a directory of YAML files, and the whole plan (every object it will create,
already built) is written to ``journal.json`` there. Each finished step is recorded at once, by an
atomic rename, so a run stopped half-way (a 5xx, a 403, Ctrl-C) can be resumed by running the
same command again: it finds the journal and carries on from the first step not recorded.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Optional

import yaml

from kubectl_kvdtype._kits.files import read_json
from kubectl_kvdtype._kits.records import record_type
from kubectl_kvdtype._kits.status import KvdtypeError
from kubectl_kvdtype._sources import model as _model


@record_type(frozen=True)
class RestoreOptions:
    """``escape restore``'s flags, typed: what putting back a backup directory reads (a rebind's,
    ``_changes.restore``, or a find-flags --fix's, ``_changes.fix.restore.restore_fix``), taken by
    the subcommand from the parsed command line."""

    directory: str
    apply: bool
    #: ``none``, ``client`` or ``server``.
    dry_run: str
    #: --force-managed: recreate or patch objects that others manage (``_changes.managed``).
    force_managed: bool = False

JOURNAL = "journal.json"
FORMAT = 1
_PREFIX = "kvdtype-backup-"


#: Written into the backup directory when a run stops (a failure, Ctrl-C, SIGTERM, SIGHUP): after
#: SIGHUP no terminal reads the message, and after a CI cancel the log may be gone.
STOPPED = "STOPPED.txt"


def _moment(now: Optional[datetime.datetime]) -> str:
    """UTC to the microsecond: two runs started within one second get two directories."""
    moment = now or datetime.datetime.now(datetime.timezone.utc)
    return moment.strftime("%Y%m%dT%H%M%S") + f"{moment.microsecond:06d}Z"


def default_directory(namespace: str, binding: str, now: Optional[datetime.datetime] = None) -> Path:
    """``./kvdtype-backup-<namespace>-<binding>-<UTC time>/`` (relative: the user's cwd)."""
    return Path(f"{_PREFIX}{namespace}-{binding}-{_moment(now)}")


def fix_directory(now: Optional[datetime.datetime] = None) -> Path:
    """``./kvdtype-backup-fix-<UTC time>/``: find-flags --fix's default."""
    return Path(f"{_PREFIX}fix-{_moment(now)}")


def check_free(directory: Path) -> None:
    """A new journal goes only into a new or empty directory: never among files it did not write
    (before the first write, so a refusal changes nothing)."""
    try:
        entries = sorted(p.name for p in directory.iterdir()) if directory.exists() else []
    except OSError as error:
        raise KvdtypeError(f"cannot use {directory} as the backup directory: {error.strerror or error}; "
                           "nothing was changed") from None
    if not entries:
        return
    if JOURNAL in entries:
        raise KvdtypeError(f"{directory} already holds {_what(directory)}: pass another --backup-dir; nothing was "
                           "changed")
    raise KvdtypeError(f"{directory} is not empty ({', '.join(entries[:3])}{', ...' if len(entries) > 3 else ''}) "
                       "and holds no journal of this run: pass a new or empty --backup-dir; nothing was changed")


def _what(directory: Path) -> str:
    """What the journal in ``directory`` records, for a refusal."""
    try:
        data = read_json(directory / JOURNAL)
    except (OSError, ValueError):
        return "a journal that cannot be read"
    if isinstance(data, dict) and data.get("operation") == "find-flags-fix":
        return "the journal of a find-flags --fix"
    if isinstance(data, dict) and data.get("binding"):
        return f"the journal of a rebind of {data.get('namespace')}/{data.get('binding')}"
    return "a journal"


def unfinished(where: Path, namespace: str, binding: str) -> list[Path]:
    """Backup directories under ``where`` holding an unfinished journal of this very rebind."""
    return _journals(where, namespace, binding, finished=False)


def finished(where: Path, namespace: str, binding: str) -> list[Path]:
    """Backup directories under ``where`` whose rebind of this Binding ran to the end."""
    return _journals(where, namespace, binding, finished=True)


def _journals(where: Path, namespace: str, binding: str, finished: bool) -> list[Path]:
    """The name prefix is only a hint (``legacy`` is a prefix of ``legacy-2``): the journal's own
    namespace and binding decide."""
    found = []
    for directory in sorted(where.glob(f"{_PREFIX}{namespace}-{binding}-*")):
        journal = Journal.read(directory) if (directory / JOURNAL).is_file() else None
        if journal and journal.matches(namespace, binding) and journal.finished == finished:
            found.append(directory)
    return found


class Journal:
    """The plan of one rebind and which of its steps are done, kept on disk after every step."""

    def __init__(self, directory: Path, data: dict) -> None:
        self.directory = directory.resolve()  # messages name it from anywhere: "resume from ..."
        self.data = data
        self._originals: list[dict] = []  # saved by create (``discard`` removes them)
        self._made_directory = False  # created by create: ``discard`` removes it too

    # --- Reading ---------------------------------------------------------------------------

    @classmethod
    def read(cls, directory: Path) -> "Journal":
        path = directory / JOURNAL
        try:
            data = read_json(path)
        except (OSError, ValueError) as error:
            reason = getattr(error, "strerror", None) or error
            raise KvdtypeError(f"cannot read the journal {path}: {reason}; nothing was changed") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("steps"), list):
            raise KvdtypeError(f"{path} is not a journal this version of kubectl-kvdtype can read; nothing was "
                               "changed")
        return cls(directory, data)

    def matches(self, namespace: str, binding: str) -> bool:
        return self.data.get("namespace") == namespace and self.data.get("binding") == binding

    def check_cluster(self, source: object, instead: str) -> None:
        """Refuse (exit 3, nothing written) a journal written for another cluster than ``source``'s:
        its server differs. The context is recorded, and named in the refusal, but not compared: it
        names a user too, and a run stopped by a 403 is carried on as someone who may (another
        context of the same server). This guards against a journal put back on the wrong cluster by
        mistake; a planted one is stopped by its steps, checked against the plan. Journals of
        versions before the record, and runs on manifests, have nothing to compare. ``instead``:
        what the user can do then."""
        recorded, current = self.data.get("cluster"), identity_of(source)
        if not isinstance(recorded, dict) or current is None:
            return
        if recorded.get("server") == current.get("server"):
            return
        raise KvdtypeError(f"the journal in {self.directory}/ was written for the cluster at {recorded.get('server')} "
                           f"({recorded.get('context')}), not for this one, {current.get('server')} "
                           f"({current.get('context')}): {instead}; nothing was changed")

    @property
    def steps(self) -> list[dict]:
        return self.data["steps"]

    @property
    def done(self) -> dict:
        """Step id -> outcome, for every step finished."""
        return self.data.setdefault("done", {})

    @property
    def options(self) -> dict:
        return self.data.get("options") or {}

    @property
    def finished(self) -> bool:
        return all(step["id"] in self.done for step in self.steps)

    # --- Writing ---------------------------------------------------------------------------

    @classmethod
    def create(cls, directory: Path, header: dict, steps: list[dict], originals: list[dict]) -> "Journal":
        """Save the originals, then the journal: both exist before the plan's first write."""
        check_free(directory)
        made = not directory.exists()
        try:
            directory.mkdir(parents=True, exist_ok=True)
            for obj in originals:
                _write_atomically(directory / backup_name(obj),
                                  yaml.safe_dump(obj, sort_keys=False, default_flow_style=False))
        except OSError as error:
            raise KvdtypeError(f"cannot write the backups to {directory}: {error.strerror or error}; "
                               "nothing was changed in the cluster") from None
        journal = cls(directory, {"format": FORMAT, **header, "steps": steps, "done": {}, "sent": {}})
        journal._originals, journal._made_directory = list(originals), made
        journal.save()
        return journal

    def save_original(self, obj: dict) -> None:
        """Save ``obj`` again, as it is now (an edit the run accepted: restore puts it back so)."""
        try:
            _write_atomically(self.directory / backup_name(obj),
                              yaml.safe_dump(obj, sort_keys=False, default_flow_style=False))
        except OSError as error:
            raise KvdtypeError(f"cannot write the backups to {self.directory}: {error.strerror or error}") from None

    def note_stop(self, message: str) -> None:
        """The message a stopped run printed, kept beside the journal (best effort: the run is
        ending already, and the journal itself says what is done)."""
        try:
            _write_atomically(self.directory / STOPPED, f"{_now()} {message}\n")
        except OSError:
            pass

    def discard(self) -> None:
        """Remove what ``create`` wrote (the run was refused before its first write): the backups,
        the journal, and the directory when ``create`` made it (a --backup-dir given empty stays)."""
        names = {JOURNAL} | {backup_name(obj) for obj in self._originals}
        for name in names:
            try:
                (self.directory / name).unlink()
            except OSError:
                pass
        if not self._made_directory:
            return
        try:
            self.directory.rmdir()  # only if nothing else is left in it
        except OSError:
            pass

    def note_sent(self, step_id: str) -> None:
        """Recorded before the step's write is sent: a rerun then knows that an object gone, or
        being deleted, went because of this run, not someone else."""
        self.data.setdefault("sent", {})[step_id] = _now()
        self.save()

    def cleared(self) -> None:
        """Every step is done: a message of an earlier stop no longer applies."""
        try:
            (self.directory / STOPPED).unlink()
        except OSError:
            pass

    def mark(self, step_id: str, outcome: str) -> None:
        self.done[step_id] = outcome
        self.save()

    def save(self) -> None:
        self.data["updated"] = _now()
        try:
            _write_atomically(self.directory / JOURNAL, json.dumps(self.data, indent=2) + "\n")
        except OSError as error:
            raise KvdtypeError(f"cannot write the rebind journal in {self.directory}: "
                               f"{error.strerror or error}") from None


def identity_of(source: object) -> Optional[dict]:
    """The cluster a source talks to (``ClusterSource.identity``), recorded in every journal so
    that it is carried on or put back only there; None for manifests."""
    found = getattr(source, "identity", None)
    return found if isinstance(found, dict) else None


def backup_name(obj: dict) -> str:
    """``<kind>-<namespace>-<name>.yaml``, lower-case and safe as one file name."""
    parts = [str(obj.get("kind") or "object"), _model.namespace_of(obj), _model.name_of(obj)]
    return re.sub(r"[^a-z0-9.-]+", "_", "-".join(p for p in parts if p).lower()) + ".yaml"


def _write_atomically(path: Path, content: str) -> None:
    """Write a temporary file beside ``path`` and rename it: never a half-written journal."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(content)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
