"""The offline twin of the cluster: objects read from manifests given with ``-f``.

Accepts YAML or JSON files, multi-document YAML, ``kind: List`` documents (what
``kubectl get ... -o yaml`` writes), directories walked recursively, and ``-`` for stdin. Nothing
here imports the kubernetes client or opens a socket.
"""

from __future__ import annotations

import os
import re
import stat
from typing import Any, Iterable, Iterator, Mapping, Optional, TextIO, Union

import yaml

from kubectl_kvdtype._kits import bounded as _bounded
from kubectl_kvdtype._kits import files as _files
from kubectl_kvdtype._kits import progress as _progress
from kubectl_kvdtype._kits import settings as _settings
from kubectl_kvdtype._kits.codes import DUPLICATE_OBJECT
from kubectl_kvdtype._kits.report import Finding, ObjectRef
from kubectl_kvdtype._kits.status import ManifestError, UsageError
from kubectl_kvdtype._sources import model as _model
from kubectl_kvdtype._sources import names as _names
from kubectl_kvdtype._sources import yamlread as _yamlread
from kubectl_kvdtype._sources.kinds import Kind, Projection, kind_for, matches_selector

_EXTENSIONS = (".yaml", ".yml", ".json")
#: The most -f reads of one file (or of standard input), in MiB of text: a 10,000-deployment JSON
#: dump is about 60 MB. ``MAX_FILE_VARIABLE`` raises (or lowers) it for one run.
MAX_FILE_MB: int = _settings.MAX_FILE_MB.default
MAX_FILE_VARIABLE = _settings.MAX_FILE_MB.name
_HINT = f"set {MAX_FILE_VARIABLE} to read bigger ones"
#: A file -f names (a pipe too: ``-f <(kubectl get ...)``), and a file met walking a directory
#: (a FIFO there is refused: nothing says anyone will ever write to it).
NAMED = _files.FileRule("a manifest file", MAX_FILE_MB << 20, "the most -f reads of one input", _HINT,
                        pipes=_files.READ, reads="-f reads files, directories and pipes")
IN_DIRECTORY = _files.FileRule("a manifest file", MAX_FILE_MB << 20, "the most -f reads of one input", _HINT,
                               reads="in a directory -f reads regular files (name a pipe itself: -f <(...), or -f -)")
_JSON_START = re.compile(r"\s*[{\[]")

#: How -f identifies an object: (kind, namespace, name); the namespace is "" for a cluster-scoped kind.
ObjectKey = tuple[str, str, str]


class ManifestSource:
    """Objects from files, answering ``Source`` questions the way an API server would."""

    description = "manifests"

    def __init__(self, objects: Iterable[Union[dict, tuple[str, dict]]]) -> None:
        """``objects``: dicts, or (file, dict) pairs so that a duplicate can name both files."""
        self._by_kind: dict[Kind, list[dict]] = {}
        #: Warning findings about the input itself (the same object read twice, differently).
        self.findings: list[Finding] = []
        #: -f arguments that held only a ``kind: List`` with no items: a valid, empty answer.
        self.empty_lists: list[str] = []
        #: The most one file may hold (``max_file_bytes``), for whoever reads the files again.
        self.max_file_bytes = MAX_FILE_MB << 20
        seen: dict[ObjectKey, tuple[str, dict, Kind, tuple[str, str]]] = {}
        kinds: dict[tuple[str, str], Optional[Kind]] = {}  # (apiVersion, kind) -> Kind: a dump repeats a few
        for entry in objects:
            where, obj = entry if isinstance(entry, tuple) else ("", entry)
            api_version, kind_name = obj.get("apiVersion"), obj.get("kind")
            if isinstance(api_version, str) and isinstance(kind_name, str):
                if (api_version, kind_name) not in kinds:
                    kinds[(api_version, kind_name)] = kind_for(api_version, kind_name)
                kind = kinds[(api_version, kind_name)]
            else:
                kind = kind_for(api_version, kind_name)
            if kind is None:
                continue
            namespace = _model.namespace_of(obj)
            if kind.namespaced and not namespace:
                # kubectl apply puts an object without a namespace in "default"; so do we.
                metadata = obj.get("metadata")
                obj["metadata"] = {**(metadata if isinstance(metadata, dict) else {}), "namespace": "default"}
                namespace = "default"
            name = _model.name_of(obj)
            if self._refused(kind, namespace, name, where):
                continue
            key = _key(kind, namespace, name)
            if key in seen:  # one object read twice: the later read wins, as kubectl apply would leave it
                self._duplicate(key, seen[key][:2], (where, obj))
            seen[key] = (where, obj, kind, (namespace, name))
        #: The file each judged object was read from, last read winning ("-" for stdin): where
        #: ``_sources.positions`` looks for its lines.
        self._seen = seen
        by_kind: dict[Kind, list[tuple[tuple[str, str], dict]]] = {}
        for _, obj, kind, order in seen.values():
            by_kind.setdefault(kind, []).append((order, obj))
        for kind, entries in by_kind.items():
            entries.sort(key=_first)  # by (namespace, name), read once per object; stable, as before
            self._by_kind[kind] = [obj for _, obj in entries]

    def origin(self, kind: str, namespace: Optional[str], name: str) -> Optional[str]:
        """The -f file the judged copy of an object came from ("-": standard input), or None when
        no object read has that kind, namespace and name."""
        found = self._seen.get((kind, namespace or "", name)) or self._seen.get((kind, "", name))
        return found[0] if found else None

    def _refused(self, kind: Kind, namespace: str, name: str, where: str) -> bool:
        """Whether the object's name or namespace is one the API server refuses: then it is a
        finding naming it and its file, and is never judged (no to-do item or command is built
        from a name that could steer a request, ``../../api/v1/...``)."""
        finding = _names.refusal(kind, namespace, name, where or "the input")
        if finding is not None:
            self.findings.append(finding)
        return finding is not None

    def _duplicate(self, key: ObjectKey, first: tuple[str, dict], last: tuple[str, dict]) -> None:
        if first[1] == last[1]:
            return  # the same body twice (-f dir/ -f dir/): one object, nothing to say
        kind, namespace, name = key
        ref = ObjectRef(kind, namespace or None, name)
        files = f"{first[0] or 'the input'} and {last[0] or 'the input'}"
        self.findings.append(Finding.of(DUPLICATE_OBJECT, ref,
                                        f"{ref} is read twice with different contents, from {files}: the one read "
                                        f"last ({last[0] or 'the input'}) is judged, as kubectl apply in that order "
                                        "would leave it.", files=[first[0], last[0]]))

    @classmethod
    def from_paths(cls, paths: Iterable[str], stdin: TextIO, environ: Optional[Mapping[str, str]] = None
                   ) -> "ManifestSource":
        paths = list(paths)
        _stdin_once(paths)
        empty_lists: list[str] = []
        objects: list[tuple[str, dict]] = []
        limit = max_file_bytes(environ or {})
        for path in paths:
            read = list(read_path(path, stdin, limit))
            if not read:
                shown = "standard input" if path == "-" else path
                raise ManifestError(f"{shown} holds no Kubernetes object (empty, or only comments or whitespace: "
                                    "what a failed kubectl get leaves); refusing to judge an empty input")
            objects += [(where, obj) for where, obj in read if obj is not None]
            if all(obj is None for _, obj in read):
                empty_lists.append(path)
        source = cls(objects)
        source.empty_lists = empty_lists
        source.max_file_bytes = limit
        return source

    def default_namespace(self) -> Optional[str]:
        return None  # a dump is judged whole unless -n narrows it

    def list(self, kind: Kind, namespace: Optional[str], selector: str = "",
             project: Optional[Projection] = None) -> list[dict]:
        found = [
            obj for obj in self._by_kind.get(kind, [])
            if (namespace is None or not kind.namespaced or _model.namespace_of(obj) == namespace)
            and (not selector or matches_selector(_model.labels_of(obj), selector))
        ]
        # Every read is handed the same parsed manifests: a projection gets its own top level.
        return [project(dict(obj)) for obj in found] if project else found

    def get(self, kind: Kind, namespace: Optional[str], name: str) -> Optional[dict]:
        return next((o for o in self.list(kind, namespace) if _model.name_of(o) == name), None)


def _stdin_once(paths: list[str]) -> None:
    """Standard input can be read once: ``-f -`` given again is a usage error before anything is
    read, as kubectl refuses it ("standard input cannot be used for multiple arguments"), never a
    second read that finds it empty and blames the input."""
    count = paths.count("-")
    if count > 1:
        raise UsageError(f"-f - is given {count} times: standard input cannot be used for multiple arguments "
                         "(it is read once; give -f - once)")


def _key(kind: Kind, namespace: str, name: str) -> ObjectKey:
    return (kind.name, namespace if kind.namespaced else "", name)


def object_key(obj: dict) -> Optional[ObjectKey]:
    """(kind, namespace, name) as -f identifies an object (a namespaced one without a namespace is
    in "default"); None for an object of a kind the plugin does not read."""
    kind = kind_for(obj.get("apiVersion"), obj.get("kind"))
    return None if kind is None else _key(kind, _model.namespace_of(obj) or "default", _model.name_of(obj))


def manifest_files(path: str) -> Iterator[str]:
    """The files -f reads for ``path``: the file itself, or a directory's YAML/JSON files in order."""
    if not os.path.isdir(path):
        yield path
        return
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(_EXTENSIONS):
                yield os.path.join(root, name)


def _first(entry: tuple) -> Any:
    return entry[0]


def max_file_bytes(environ: Mapping[str, str]) -> int:
    """The most -f reads of one input, in bytes: ``MAX_FILE_MB``, or what ``MAX_FILE_VARIABLE`` says."""
    return int(_settings.value(environ, _settings.MAX_FILE_MB)) << 20


def read_path(path: str, stdin: TextIO, limit: int = MAX_FILE_MB << 20) -> Iterator[tuple[str, Optional[dict]]]:
    """(file, object) for every object in a file, a directory (recursively, YAML/JSON files only) or
    ``-``; (file, None) for a ``kind: List`` with no items (an empty answer, not an empty input).
    Each input is read up to ``limit`` bytes: more is refused, not read on (``/dev/urandom``)."""
    if path == "-":
        _progress.note("reading standard input")
        _refuse_device(stdin, "standard input")
        try:
            content = stdin.read(limit + 1)
        except (OSError, UnicodeDecodeError) as error:
            raise ManifestError(f"cannot read the manifests on standard input: {error}") from None
        _within(len(content), limit, "standard input")
        yield from _located("-", _objects(_parse(content, "standard input")))
        _progress.done()
        return
    for file in manifest_files(path):
        yield from _read_file(file, limit, named=file == path)


def _located(where: str, objects: Iterator[Optional[dict]]) -> Iterator[tuple[str, Optional[dict]]]:
    return ((where, obj) for obj in objects)


def _read_file(path: str, limit: int, named: bool = True) -> Iterator[tuple[str, Optional[dict]]]:
    _progress.note(f"reading {path}")
    try:
        content = read_text(path, limit, named)
    except FileNotFoundError:
        raise ManifestError(f"the manifest {path} does not exist") from None
    except _files.Unreadable as error:
        raise ManifestError(f"{path} {error.predicate}") from None
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise ManifestError(f"cannot read the manifest {path}: {reason}") from None
    yield from _located(path, _objects(_parse(content, path)))
    _progress.done()


def _refuse_device(stream: Any, shown: str) -> None:
    """A character device (``/dev/zero``, ``/dev/urandom``, a serial line) is an endless stream, no
    manifest; a terminal is the one kept (a person typing, ending with Ctrl-D)."""
    try:
        mode = os.fstat(stream.fileno()).st_mode
        terminal = stream.isatty()
    except (AttributeError, OSError, ValueError):  # an in-memory stream
        return
    if stat.S_ISCHR(mode) and not terminal:
        raise ManifestError(f"{shown} {_files.refused(mode, NAMED)}")


def _within(size: int, limit: int, shown: str) -> None:
    if size > limit:
        raise ManifestError(f"{shown} {_files.too_big(NAMED.with_limit(limit)).predicate}")


def _parse(content: str, where: str) -> list:
    try:
        return _load_documents(content)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or "it is not valid YAML or JSON"
        raise ManifestError(f"cannot parse the manifest {where}{at}: {problem}") from None
    except ValueError as error:  # nested too deep, too many aliases; an integer too long to convert (Python's
        # 4300-digit limit), as JSON or YAML
        raise ManifestError(f"cannot parse the manifest {where}: {_first_sentence(error)}") from None
    except MemoryError:  # a hostile dump of millions of empty lists: say it, never an internal error
        raise ManifestError(f"cannot parse the manifest {where}: it holds more objects than this process has "
                            "memory for") from None


def _first_sentence(error: Exception) -> str:
    return str(error).split(": value has")[0].split("; use sys.")[0]


def read_text(path: str, limit: int = MAX_FILE_MB << 20, named: bool = True) -> str:
    """A manifest's text as -f reads it (UTF-8, universal newlines: a CRLF is one line break), at
    most ``limit`` bytes of it; ``named``: -f named it (a FIFO is read), else a directory holds it
    (a FIFO is refused). Raises ``_kits.files.Unreadable`` for a special file or one too big."""
    rule = (NAMED if named else IN_DIRECTORY).with_limit(limit)
    return _files.read_text(path, rule)


def looks_like_json(content: str) -> bool:
    """Whether -f tries ``json`` first on this content (see ``_load_documents``)."""
    return _JSON_START.match(content) is not None


#: The YAML loader whose nodes ``_sources.positions`` reads (lines kept): libyaml's when PyYAML has it, as
#: ``_sources.yamlread`` uses libyaml's parser for the ordinary read.
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _load_documents(content: str) -> list:
    """The documents of a manifest: JSON read by ``json``, anything else as PyYAML's safe loader reads it.

    ``kubectl get -o json`` dumps are JSON, which ``json`` reads many times faster and in less
    memory than any YAML loader. Content that only looks like JSON (a YAML flow mapping, or broken
    JSON) goes to the YAML reader, which reads every JSON document the same way and words the
    error. YAML is built straight from libyaml's events (``_sources.yamlread``): the same objects as
    PyYAML's C loader, ~3x faster and without holding a node per value of a whole dump.
    """
    if looks_like_json(content) and not _bounded.too_deep(content):  # deep: the YAML reader says so, exactly
        try:
            return [_bounded.loads(content)]
        except ValueError:
            pass
    return _yamlread.load_all(content)


def _objects(documents: list) -> Iterator[Optional[dict]]:
    """Objects of the documents, with ``kind: *List`` documents (kubectl get dumps) unrolled; None
    stands for a List without items."""
    for document in documents:
        if not isinstance(document, dict):
            continue
        items = document.get("items")
        if isinstance(items, list) and str(document.get("kind", "")).endswith("List"):
            yield from (_objects(items) if items else [None])
        elif "kind" in document:
            yield document
