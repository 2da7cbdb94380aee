"""An extra engine table file (``KUBECTL_KVDTYPE_ENGINE_TABLES``), validated whole before it is used.

The shipped tables (``data/engine_options.jsonl``) are written by ``scripts/engine-tables`` and
tested; a file added for one run may be anything. ``_engines.parsers`` indexes, iterates and builds an
argparse parser from every part of a table, so a table that only looks like one would end a
run in ``KeyError`` or ``TypeError``, and one that lacks the flag would make every argv read as
"absent" (the engine's default: everything "ok") without a word. So :func:`validate` checks the
whole file against the shape ``scripts/engine-tables`` writes, down to each option, including that
each table holds ``--kv-cache-dtype`` and each entry point the engine's record names, and then
builds every parser it describes. A problem is one :class:`TableError`: the field, as a path into
the file (``tables.vLLM.0.34.0.actions[3].options``), and what is wrong with it.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Optional

from kubectl_kvdtype._engines import records as _records
from kubectl_kvdtype._kits import bounded as _bounded

#: The argparse actions the recorded tables hold (what ``_engines.parsers._add`` rebuilds).
ACTIONS = frozenset({"store", "store_true", "store_false", "store_const", "append", "append_const", "extend",
                     "count", "boolean_optional", "help", "version", "parsers"})
_NARGS = frozenset({"?", "*", "+"})
_TABLE_SETTINGS = ("prog", "allow_abbrev", "prefix_chars", "fromfile_prefix_chars")
#: What an entry point holds besides the table settings it overrides.
_ENTRY_KEYS = frozenset({"parser", "steps", "words", "without", "with"})


class TableError(ValueError):
    """One problem of an extra table file: ``field`` (a path into it) and ``problem``."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}" if field else problem)
        self.field = field
        self.problem = problem


def validate(data: Any, steps: Iterable[str], build: Callable[[dict, str], None]) -> dict:
    """``data`` (a parsed table file) when it is one, its JSON-text tables decoded; else
    ``TableError``. ``steps``: the argv pre-processing steps an entry point may name; ``build``:
    builds the parser of one table (raises on one argparse refuses)."""
    known_steps = frozenset(steps)
    top = _mapping(data, "")
    for key in ("versions", "tables"):
        if key not in top:
            raise TableError(key, "missing: the file records no engine version")
    versions, tables = _mapping(top["versions"], "versions"), _mapping(top["tables"], "tables")
    same = _mapping(top.get("same", {}), "same")
    _prefixes(top.get("shortest_flag_prefix", {}))
    if not versions:
        raise TableError("versions", "empty: the file records no engine version")
    decoded: dict[str, dict] = {}
    for engine, listed in versions.items():
        record = _engine(engine, f"versions.{engine}")
        own = _mapping(tables.get(engine), f"tables.{engine}")
        aliases = _mapping(same.get(engine, {}), f"same.{engine}")
        decoded[engine] = {}
        for index, version in enumerate(_list(listed, f"versions.{engine}", nonempty=True)):
            where = f"versions.{engine}[{index}]"
            if not isinstance(version, str) or _records.parse_version(version) is None:
                raise TableError(where, f"{_shown(version)} is not an engine version")
            key = aliases.get(version, version)
            if not isinstance(key, str) or key not in own:
                raise TableError(f"tables.{engine}.{key if isinstance(key, str) else version}",
                                 f"missing: version {version} has no table")
        for version, stored in own.items():
            where = f"tables.{engine}.{version}"
            table = _decode(stored, where)
            _table(table, where, record, known_steps)
            try:
                build(table, where)
            except TableError:
                raise
            except Exception as error:  # noqa: BLE001 - whatever argparse refuses in it
                raise TableError(where, f"its parser cannot be built ({type(error).__name__}: {error})") from None
            decoded[engine][version] = table
    return {**top, "tables": {**tables, **decoded}}


def _engine(name: str, where: str) -> _records.Engine:
    found = next((r for r in _records.RECORDS if r.table == name), None)
    if found is None:
        raise TableError(where, f"{_shown(name)} is no engine this tool knows "
                                f"({', '.join(r.table for r in _records.RECORDS)})")
    return found


def _decode(stored: Any, where: str) -> dict:
    if isinstance(stored, str):  # the shipped file keeps each table as JSON text
        try:
            stored = _bounded.loads(stored)
        except ValueError as error:
            raise TableError(where, f"not a table ({error})") from None
    return _mapping(stored, where)


def _table(table: dict, where: str, record: _records.Engine, steps: frozenset[str]) -> None:
    _settings(table, where, required=True)
    actions = _actions(table.get("actions"), f"{where}.actions")
    flags = [a for a in actions if a["dest"] == _records.FLAG_DEST and _records.FLAG in a["options"]]
    if not flags:
        raise TableError(f"{where}.actions", f"no option {_records.FLAG}: without it every argv would read as "
                                             "passing no dtype, and every verdict as ok")
    flag = flags[0]
    if flag["action"] != "store" or flag.get("nargs") is not None:
        raise TableError(f"{where}.actions", f"{_records.FLAG} must take one value (action store, no nargs)")
    dests = {a["dest"] for a in actions}
    for index, group in enumerate(_list(table.get("mutually_exclusive", []), f"{where}.mutually_exclusive")):
        for dest in _list(group, f"{where}.mutually_exclusive[{index}]"):
            if dest not in dests:
                raise TableError(f"{where}.mutually_exclusive[{index}]", f"{_shown(dest)} is no option's dest")
    if "top" in table:
        parent = _mapping(table["top"], f"{where}.top")
        _settings(parent, f"{where}.top", required=True)
        _actions(parent.get("actions"), f"{where}.top.actions")
    points = _mapping(table.get("entry_points", {}), f"{where}.entry_points")
    if "entry_points" in table:
        for _, name in record.entry_points:
            if name not in points:
                raise TableError(f"{where}.entry_points", f"no entry point {name!r} (the {record.name} record "
                                                          "starts its argvs there)")
    for name, point in points.items():
        _entry_point(_mapping(point, f"{where}.entry_points.{name}"), f"{where}.entry_points.{name}", table, steps)
    if "start_check" in table:
        check = _mapping(table["start_check"], f"{where}.start_check")
        _strings(check.get("accepted"), f"{where}.start_check.accepted")
        if not isinstance(check.get("message"), str):
            raise TableError(f"{where}.start_check.message", "missing, or not text")


def _entry_point(point: dict, where: str, table: dict, steps: frozenset[str]) -> None:
    if point.get("parser") not in ("own", "top"):
        raise TableError(f"{where}.parser", f"{_shown(point.get('parser'))} is neither 'own' nor 'top'")
    if point["parser"] == "top" and "top" not in table:
        raise TableError(f"{where}.parser", "'top', but the table has no top-level parser (top)")
    for index, step in enumerate(_list(point.get("steps", []), f"{where}.steps")):
        if step not in steps:
            raise TableError(f"{where}.steps[{index}]", f"{_shown(step)} is no argv step this tool knows "
                                                        f"({', '.join(sorted(steps))})")
    _strings(point.get("words", []), f"{where}.words")
    _strings(point.get("without", []), f"{where}.without")
    _actions(point.get("with", []), f"{where}.with", nonempty=False)
    unknown = [key for key in point if key not in _ENTRY_KEYS and key not in _TABLE_SETTINGS]
    if unknown:
        raise TableError(f"{where}.{unknown[0]}", "not a setting an entry point may hold")
    _settings(point, where, required=False)


def _settings(table: dict, where: str, required: bool) -> None:
    checks: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
        ("prog", lambda v: isinstance(v, str), "text"),
        ("allow_abbrev", lambda v: isinstance(v, bool), "true or false"),
        ("prefix_chars", lambda v: isinstance(v, str) and v != "", "text of at least one character"),
    )
    for key, good, what in checks:
        if key not in table:
            if required:
                raise TableError(f"{where}.{key}", "missing")
            continue
        if not good(table[key]):
            raise TableError(f"{where}.{key}", f"{_shown(table[key])} is not {what}")
    chars = table.get("fromfile_prefix_chars")
    if chars is not None and not (isinstance(chars, str) and chars):
        raise TableError(f"{where}.fromfile_prefix_chars", f"{_shown(chars)} is neither null nor text")


def _actions(value: Any, where: str, nonempty: bool = True) -> list[dict]:
    actions = [_mapping(entry, f"{where}[{index}]") for index, entry in enumerate(_list(value, where, nonempty))]
    for index, entry in enumerate(actions):
        _action(entry, f"{where}[{index}]")
    return actions


def _action(entry: dict, where: str) -> None:
    if entry.get("action") not in ACTIONS:
        raise TableError(f"{where}.action", f"{_shown(entry.get('action'))} is no argparse action the tables "
                                            f"record ({', '.join(sorted(ACTIONS))})")
    if not isinstance(entry.get("dest"), str) or not entry["dest"]:
        raise TableError(f"{where}.dest", "missing, or not text")
    options = _strings(entry.get("options"), f"{where}.options")
    if any(not option for option in options):
        raise TableError(f"{where}.options", "holds an empty option string")
    nargs = entry.get("nargs")
    if nargs is not None and not (isinstance(nargs, int) and not isinstance(nargs, bool) and nargs >= 0) \
            and nargs not in _NARGS:
        raise TableError(f"{where}.nargs", f"{_shown(nargs)} is no argparse nargs (a count, '?', '*' or '+')")
    if "choices" in entry and entry["choices"] is not None:
        _strings(entry["choices"], f"{where}.choices")
    if "required" in entry and not isinstance(entry["required"], bool):
        raise TableError(f"{where}.required", f"{_shown(entry['required'])} is not true or false")
    if "shown" in entry:
        _strings(entry["shown"], f"{where}.shown")


def _prefixes(value: Any) -> None:
    for engine, length in _mapping(value, "shortest_flag_prefix").items():
        _engine(engine, f"shortest_flag_prefix.{engine}")
        if not isinstance(length, int) or isinstance(length, bool) or not 3 <= length <= len(_records.FLAG):
            raise TableError(f"shortest_flag_prefix.{engine}",
                             f"{_shown(length)} is not a prefix length of {_records.FLAG}")


def _mapping(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise TableError(where, f"{_kind(value)}, not a mapping")
    return value


def _list(value: Any, where: str, nonempty: bool = False) -> list:
    if not isinstance(value, list):
        raise TableError(where, f"{_kind(value)}, not a list")
    if nonempty and not value:
        raise TableError(where, "empty")
    return value


def _strings(value: Any, where: str) -> list[str]:
    items = _list(value, where)
    for index, item in enumerate(items):
        if not isinstance(item, str):
            raise TableError(f"{where}[{index}]", f"{_kind(item)}, not text")
    return items


def _kind(value: Any) -> str:
    return "missing" if value is None else {dict: "a mapping", list: "a list", str: "text", bool: "true/false",
                                            int: "a number", float: "a number"}.get(type(value), "a value")


def _shown(value: Optional[object]) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:60] + "..."
