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
from typing import Iterable, Optional

import yaml

from kubectl_kvdtype import _model
from kubectl_kvdtype._status import KvdtypeError

JOURNAL = "journal.json"
FORMAT = 1
_PREFIX = "kvdtype-backup-"


def default_directory(namespace: str, binding: str, now: Optional[datetime.datetime] = None) -> Path:
    """``./kvdtype-backup-<namespace>-<binding>-<UTC time>/`` (relative: the user's cwd)."""
    moment = now or datetime.datetime.now(datetime.timezone.utc)
    return Path(f"{_PREFIX}{namespace}-{binding}-{moment.strftime('%Y%m%dT%H%M%SZ')}")


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

    # --- Reading ---------------------------------------------------------------------------

    @classmethod
    def read(cls, directory: Path) -> "Journal":
        path = directory / JOURNAL
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            reason = getattr(error, "strerror", None) or error
            raise KvdtypeError(f"cannot read the rebind journal {path}: {reason}") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("steps"), list):
            raise KvdtypeError(f"{path} is not a rebind journal this version of kubectl-kvdtype can resume")
        return cls(directory, data)

    def matches(self, namespace: str, binding: str) -> bool:
        return self.data.get("namespace") == namespace and self.data.get("binding") == binding

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
    def create(cls, directory: Path, header: dict, steps: list[dict], originals: Iterable[dict]) -> "Journal":
        """Save the originals, then the journal: both exist before the plan's first write."""
        try:
            directory.mkdir(parents=True, exist_ok=True)
            if (directory / JOURNAL).exists():
                raise KvdtypeError(f"{directory} already holds a rebind journal: pass another --backup-dir")
            for obj in originals:
                _write_atomically(directory / backup_name(obj),
                                  yaml.safe_dump(obj, sort_keys=False, default_flow_style=False))
        except OSError as error:
            raise KvdtypeError(f"cannot write the backups to {directory}: {error.strerror or error}; "
                               "nothing was changed in the cluster") from None
        journal = cls(directory, {"format": FORMAT, **header, "steps": steps, "done": {}})
        journal.save()
        return journal

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
