"""The engines' recorded parsers: their option tables, and a real argparse parser rebuilt from each.

The engines parse their command line with argparse. Rather than re-deriving argparse's rules
(abbreviations, ``=`` forms, value slots, ``--``, repetitions), this module builds a real
``argparse.ArgumentParser`` per engine version and entry point from the option tables recorded from
the engines' released wheels (``data/engine_options.jsonl``, written by ``scripts/engine-tables``,
and any table file added for a run), and lets that parser decide (:func:`parse`), after the entry
point's own argv rewriting (``_engines.rewrites``). Which values the flag accepts: the recorded
choices at a recorded version; between recordings the spelling table's at the version
(``_engines.records.spellings``), taken as data. ``tests/test_engine_corpus.py`` checks the result
against what the engines' real parsers did on a few thousand generated argvs.

Engines are named by their ``_engines.records`` record (table key, entry points, argv rewriting):
nothing here branches on an engine's name.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
from typing import Any, Iterable, Iterator, NoReturn, Optional, Sequence

from kubectl_kvdtype._engines import records as _records
from kubectl_kvdtype._engines import rewrites as _rewrites
from kubectl_kvdtype._kits import files as _files
from kubectl_kvdtype._kits.records import record_type

#: ``Reading.state``.
VALUE = "value"
ABSENT = "absent"
FAILED = "failed"
UNKNOWN = "unknown"


@record_type(frozen=True)
class Reading:
    """What an engine makes of its argv, for ``--kv-cache-dtype``.

    ``state`` is VALUE (the engine runs with ``value``), ABSENT (no flag: the engine's default),
    FAILED (the engine exits at startup; ``error`` is the message it prints, ``exit_code`` its
    status; ``at_start``: the parser let ``value`` through and the engine's recorded start check
    refused it) or UNKNOWN (the value depends on something not in the object; ``error`` says what).
    """

    state: str
    value: Optional[str] = None
    error: str = ""
    exit_code: int = 0
    table: str = ""  # the recorded engine version whose option table decided
    #: UNKNOWN from a shell line: what the engine makes of it with the unknown variables unset.
    default: Optional["Reading"] = None
    at_start: bool = False  # FAILED by the engine's check at start, not by its parser


# --- Tables ------------------------------------------------------------------------------------

_EXTRA: dict[str, dict] = {}  # path: its tables, in the order added


#: The shipped tables, as JSON lines: the first line is the index (the versions, which share a
#: table, the shortest flag prefix, and for each stored table the number of its line), each other
#: line one table. A run decodes the index and the tables it uses, not the megabyte of all of them.
SHIPPED_TABLES = "data/engine_options.jsonl"


@functools.lru_cache(maxsize=1)
def _shipped_lines() -> list[bytes]:
    """The shipped tables' lines, read beside this module: where a venv and both builds of the
    binary keep the package's data files (``pkgutil.get_data`` reads the same file, and its import,
    with ``importlib.util`` and ``weakref``, was a share of a small run's start)."""
    try:
        with open(os.path.join(os.path.dirname(__file__), SHIPPED_TABLES), "rb") as shipped:
            return shipped.read().split(b"\n")
    except OSError as error:  # pragma: no cover - a broken install
        raise RuntimeError(f"kubectl_kvdtype/_engines/{SHIPPED_TABLES} cannot be read: {error}") from None


def shipped_document() -> dict:
    """The shipped tables as one document, in an extra table file's shape (each table as its JSON
    text, as ``scripts/engine-tables --out`` writes one): what the whole validation of a table file
    reads, and the writer's output compared."""
    lines = _shipped_lines()
    index = json.loads(lines[0])
    return {**index, "tables": {engine: {version: lines[number].decode() for version, number in numbered.items()}
                                for engine, numbered in index["tables"].items()}}


@functools.lru_cache(maxsize=1)
def _tables() -> dict:
    """The recorded option tables, loaded on first use (never at start-up: --version stays fast),
    with any extra table file added (:func:`add_tables`) merged in: its versions join the shipped
    ones, a version both record takes the extra file's table. A shipped table is the number of
    its line until :func:`_decoded` reads it; an extra file's is its JSON text or its mapping."""
    data = json.loads(_shipped_lines()[0])
    for extra in _EXTRA.values():
        for engine, versions in extra["versions"].items():
            known = data["versions"].setdefault(engine, [])
            known[:] = sorted(set(known) | set(versions), key=_recorded_key)
            same = data.setdefault("same", {}).setdefault(engine, {})
            for version in versions:
                same.pop(version, None)
            same.update(extra.get("same", {}).get(engine, {}))
            data["tables"].setdefault(engine, {}).update(extra["tables"].get(engine, {}))
    return data


#: An extra table file: a regular file (a FIFO or a device is refused, not waited on), no bigger
#: than the shipped tables could grow to.
TABLE_FILE_RULE = _files.FileRule("an engine table file", 64 << 20, "the most read of one engine table file",
                                  reads="write it with scripts/engine-tables --only ENGINE==VERSION --out FILE")


def add_tables(path: str) -> None:
    """Add an extra recorded table file (an engine release newer than the shipped data).

    Raises ValueError with one sentence naming the file (and the field) when it cannot be read or
    is not a table file, validated whole (``_engines.tables.validate``)."""
    from kubectl_kvdtype._engines import tables as _table_file  # its validation: only a run that adds a file

    try:
        raw = _files.read_json(path, TABLE_FILE_RULE)
    except _files.Unreadable as error:
        raise ValueError(f"the engine tables {path} {error.predicate}") from None
    except (OSError, ValueError) as error:  # UnicodeDecodeError, bad JSON, nested too deep
        raise ValueError(f"cannot read the engine tables {path}: {getattr(error, 'strerror', None) or error}") \
            from None
    try:
        extra = _table_file.validate(raw, _rewrites.REWRITES, _build_all)
    except _table_file.TableError as error:
        raise ValueError(f"{path} is not an engine table file written by scripts/engine-tables: {error}") from None
    _EXTRA[path] = extra
    clear_caches()


def _build_all(table: dict, where: str) -> None:
    """Every parser one table describes (the validation of an added one: argparse's refusals)."""
    _build(table, None)
    if "top" in table:
        _build(table["top"], None)
    for point in table.get("entry_points", {}).values():
        if point.get("parser") == "own":
            _build(_entry_table(table, point), None)


def ships(engine: str, table: str) -> bool:
    """Whether this tool ships a recorded table for the release ``table``: an added file's table
    for it then replaces the shipped one (a verdict resting on it says so)."""
    return table in _shipped_index()["versions"].get(_records.record(engine).table, ())


@functools.lru_cache(maxsize=1)
def _shipped_index() -> dict:
    return json.loads(_shipped_lines()[0])


def added_by(engine: str, table: str) -> Optional[str]:
    """The extra table file (``add_tables``) a recorded version's table comes from; None: shipped."""
    key = _records.record(engine).table
    found = None
    for path, extra in _EXTRA.items():  # the last added wins, as when the tables are merged
        if table in extra["versions"].get(key, []):
            found = path
    return found


def added_files() -> list[str]:
    """The extra table files added for this run, in the order added."""
    return list(_EXTRA)


def clear_caches() -> None:
    """Forget everything derived from the tables (after :func:`add_tables`, or removing one)."""
    for cache in (_tables, _decoded, _table_version_cached, _long_options, shortest_flag_prefix, _parser, parse):
        cache.cache_clear()


def _recorded_key(version: str) -> _records.Version:
    """A recorded version, parsed: the tables hold released versions only, so it always reads."""
    key = _records.parse_version(version)
    if key is None:  # pragma: no cover - broken shipped tables
        raise RuntimeError(f"kubectl_kvdtype/_engines/{SHIPPED_TABLES} records an unreadable version "
                           f"{version!r}")
    return key


def recorded_versions(engine: str) -> list[str]:
    """The engine versions whose parsers were recorded, oldest first."""
    return list(_tables()["versions"][_records.record(engine).table])


def _recorded(engine: str, table: str) -> dict:
    """A recorded version's table: releases whose table did not change share the first one's."""
    key = _records.record(engine).table
    return _decoded(key, _tables().get("same", {}).get(key, {}).get(table, table))


@functools.lru_cache(maxsize=64)
def _decoded(key: str, table: str) -> dict:
    """One stored table, decoded on first use (a run reads one or two of them): a shipped one from
    its line, an extra file's from its JSON text."""
    stored = _tables()["tables"][key][table]
    if isinstance(stored, int):
        return json.loads(_shipped_lines()[stored])
    return json.loads(stored) if isinstance(stored, str) else stored


def recorded_choices(engine: str, table: str) -> Optional[tuple[str, ...]]:
    """The choices of ``--kv-cache-dtype`` in one recorded table; None when its parser checks none."""
    actions = _recorded(engine, table)["actions"]
    choices = next((e.get("choices") for e in actions if e["dest"] == _records.FLAG_DEST), None)
    return None if choices is None else tuple(choices)


#: Where a recorded start check's message holds the refused value, as Python's repr shows it
#: (scripts/_engine_worker.py VALUE_SLOT).
_VALUE_SLOT = "{value!r}"


def start_check(engine: str, table: str) -> Optional[frozenset[str]]:
    """The values the engine's own check at start accepts, recorded from the released wheel where
    the table's parser lists no choices for the flag (vLLM 0.33+: ``CacheConfig``'s validation);
    None when the table records no such check (the parser's choices decide)."""
    check = _recorded(engine, table).get("start_check")
    return None if check is None else frozenset(check["accepted"])


def refused_at_start(engine: str, table: str, value: str) -> Optional[str]:
    """The message the engine ends with when its recorded start check refuses ``value``; None
    when it accepts it or the table records no start check."""
    check = _recorded(engine, table).get("start_check")
    if check is None or value in check["accepted"]:
        return None
    return str(check["message"]).replace(_VALUE_SLOT, repr(value))


def steps(engine: str, table: str) -> frozenset[str]:
    """Every argv rewriting step an entry point of one recorded table names (``_engines.rewrites``);
    a table recorded before entry points were: the engine record's own."""
    points = _recorded(engine, table).get("entry_points")
    if points is None:
        rewrite = _records.record(engine).argv_rewrite
        return frozenset([rewrite] if rewrite else [])
    return frozenset(step for point in points.values() for step in point.get("steps", ()))


def table_version(engine: str, version: object) -> str:
    """The nearest recorded version at or below ``version`` (memoized; see :func:`_table_version`)."""
    try:
        return _table_version_cached(engine, version)
    except TypeError:  # an unhashable version from a hand-written manifest
        return _table_version(engine, None)


def _table_version(engine: str, version: object) -> str:
    """The nearest recorded version at or below ``version`` (below the lowest, or unreadable: the lowest...

    ...unless unreadable, which means the operator's reference version: the caller passes that)."""
    recorded = recorded_versions(engine)
    wanted = _records.parse_version(version)
    if wanted is None:
        return recorded[0]
    chosen = recorded[0]
    for candidate in recorded:
        if _recorded_key(candidate) <= wanted:
            chosen = candidate
    return chosen


@functools.lru_cache(maxsize=64)
def _long_options(engine: str, table: str) -> tuple[str, ...]:
    """Every ``--`` option string of the engine's server parser in one recorded table."""
    return tuple(o for e in _recorded(engine, table)["actions"] for o in e["options"] if o.startswith("--"))


def option_matches(engine: str, table: str, name: str) -> tuple[str, ...]:
    """The options argparse matches ``name`` (an option name, no ``=value``) against, in one table.

    After the engine's own rewriting of option names (vLLM: underscores to dashes): the exact
    option; else, when the parser allows abbreviations, every option it is a prefix of (one:
    argparse expands it; several: ``ambiguous option``; none: ``unrecognized arguments``)."""
    if _records.record(engine).argv_rewrite == "flexible" and name.startswith("--"):
        name = _rewrites.dashed(name)
    options = _long_options(engine, table)
    if name in options:
        return (name,)
    if not _recorded(engine, table)["allow_abbrev"] or not name.startswith("--"):
        return ()
    return tuple(o for o in options if o.startswith(name))


@functools.lru_cache(maxsize=16)
def shortest_flag_prefix(engine: str) -> int:
    """The length of the shortest abbreviation of the flag some recorded version of ``engine`` reads."""
    stored = _shipped_prefix(engine)
    if stored is None:
        return _prefix_in(engine, _distinct_tables(engine))
    extra = {v for data in _EXTRA.values() for v in data["versions"].get(_records.record(engine).table, [])}
    return min(stored, _prefix_in(engine, sorted(extra)))


def _prefix_in(engine: str, tables: Iterable[str]) -> int:
    shortest = len(_records.FLAG)
    for table in tables:
        if not _recorded(engine, table)["allow_abbrev"]:
            continue
        near = [o for o in _long_options(engine, table) if o.startswith(_records.FLAG[:3])]
        for length in range(len("--") + 1, len(_records.FLAG)):
            near = [o for o in near if o.startswith(_records.FLAG[:length])]
            if near == [_records.FLAG]:
                shortest = min(shortest, length)
                break
    return shortest


def _shipped_prefix(engine: str) -> Optional[int]:
    """What scripts/engine-tables stored for the shipped tables (so that the first find-flags
    decodes no table it does not judge with); None in data written before it did."""
    return _tables().get("shortest_flag_prefix", {}).get(_records.record(engine).table)


def _distinct_tables(engine: str) -> list[str]:
    """One recorded version per stored table (releases with an unchanged table share it)."""
    same = _tables().get("same", {}).get(_records.record(engine).table, {})
    return [v for v in recorded_versions(engine) if v not in same]


_table_version_cached = functools.lru_cache(maxsize=256)(_table_version)


# --- The parser, rebuilt from a table --------------------------------------------------------

class _Stop(Exception):
    """The parser gave up: argparse's error() (exit 2), or an early exit (-h: exit 0)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


class _Parser(argparse.ArgumentParser):
    _formatter: Optional[argparse.HelpFormatter] = None

    def _get_formatter(self) -> argparse.HelpFormatter:
        # argparse asks for a new formatter at each add_argument, only to check a metavar against
        # nargs, and each one measures the terminal: a third of building an engine's hundreds of
        # options. These parsers never print help or usage (error raises), so one formatter,
        # made once and of a fixed width (no terminal measured, no shutil imported), serves every such check.
        if self._formatter is None:
            self._formatter = argparse.HelpFormatter(prog=self.prog, width=80)
        return self._formatter

    def error(self, message: str) -> NoReturn:
        raise _Stop(message, 2)

    def exit(self, status: int = 0, message: Optional[str] = None) -> NoReturn:
        raise _Stop(f"exit {status}: {message}", status)


#: The action classes of a stored value, by whether it appends: argparse's own (``store``, ``append``).
_STORE = {False: argparse._StoreAction, True: argparse._AppendAction}


class _Switch(argparse.Action):
    """Any option that takes no value (store_true, store_const, count, enable/disable pairs)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: Optional[str] = None) -> None:
        setattr(namespace, self.dest, True)


class _Exit(_Switch):
    """-h/--help, --version: the engine prints and exits 0 without starting."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: Optional[str] = None) -> None:
        parser.exit()


class _Choices:
    """The flag's choices between recorded versions: the spelling table's at the version, as data
    (``_engines.records.spellings``); a value it does not know passes, since it may be new, and
    the caller calls it unknown. argparse's message lists the recorded choices the spelling table
    does not refuse at the version and those it accepts there that the recording lacks: never the
    value it refuses (vLLM 0.10.0, judged with 0.18.0's parser, does not list bfloat16)."""

    def __init__(self, recorded: Sequence[str], spellings: _records.Spellings) -> None:
        self._recorded = list(recorded)
        self._spellings = spellings

    def __contains__(self, value: object) -> bool:
        if not isinstance(value, str):
            return False
        return value in self._spellings.accepted or (value not in self._spellings.refused and value != "")

    def __iter__(self) -> Iterator[str]:
        listed = [value for value in self._recorded if value not in self._spellings.refused]
        return iter(listed + sorted(self._spellings.accepted.difference(listed)))


def _build(table: dict, spellings: Optional[_records.Spellings], required: bool = True) -> _Parser:
    parser = _Parser(prog=table["prog"], add_help=False, allow_abbrev=table["allow_abbrev"],
                     prefix_chars=table["prefix_chars"],
                     fromfile_prefix_chars=table.get("fromfile_prefix_chars"))
    groups = {dest: parser.add_mutually_exclusive_group() for group in table.get("mutually_exclusive", [])
              for dest in group}
    for entry in table["actions"]:
        if entry["action"] == "parsers":
            continue
        _add(groups.get(entry["dest"], parser), entry, spellings, required)
    # Every parse walks ``_actions`` twice (filling in defaults, then looking for missing required
    # arguments): hundreds of options, most of a parse's cost. Options are found through
    # ``_option_string_actions``, and with no defaults (see _add) an option that is neither
    # positional nor required plays no part in those walks: keep only the ones that do.
    parser._actions[:] = [a for a in parser._actions if not a.option_strings or a.required]  # shared with groups
    return parser


def _add(container: Any, entry: dict, spellings: Optional[_records.Spellings], required: bool) -> None:
    options, kind, nargs = entry["options"], entry["action"], entry.get("nargs")
    kwargs: dict = {"dest": entry["dest"]} if options else {}
    if entry.get("required") and required:
        kwargs["required"] = True
    if kind in ("help", "version"):
        action_class: Any = _Exit
    elif nargs == 0:
        action_class = _Switch
    else:
        if nargs is not None:
            kwargs["nargs"] = nargs
        choices = entry.get("choices")
        if choices is not None:
            if entry["dest"] == _records.FLAG_DEST and spellings is not None:
                choices = _Choices(choices, spellings)
            kwargs["choices"] = choices
        action_class = _STORE[kind in ("append", "extend")]
    if options:
        # An option is made and registered as add_argument would, without what add_argument adds
        # to that: re-deriving the dest and option strings the recording holds, and a help
        # formatter's check of the metavar (these parsers print no help). Half of a build's cost.
        action = action_class(list(options), **kwargs)
        container._add_action(action)
    else:  # a positional: argparse decides whether it is required from its nargs, as the engine's did
        action = container.add_argument(entry["dest"], action=action_class, **kwargs)
    if "shown" in entry:
        action.option_strings = list(entry["shown"])
    # No defaults: "not given" stays distinguishable from any value, and argparse skips setting
    # hundreds of attributes per parse (most of a parse's cost otherwise).
    action.default = argparse.SUPPRESS


@functools.lru_cache(maxsize=256)
def _parser(engine: str, table: str, version_text: str, required: bool = True,
            entry: str = "") -> tuple[_Parser, _Parser]:
    """(parser the argv starts at, engine parser) for one engine version's entry point; memoized.

    ``required`` False drops the options the engine requires (SGLang's ``--model-path``): when
    the image's entrypoint starts the engine, what it passes before the container's arguments is
    not in the object, so their absence is not held against the argv. ``entry`` names an entry
    point of the table ("" or unrecorded: the shared parser as the engine's default one)."""
    recorded = _recorded(engine, table)
    # At a recorded version its parser's recorded choices are the truth (the recording wins);
    # between recordings the spelling table's at the version decide (see _Choices).
    spellings = None if _at_recorded(version_text, table) else _records.spellings(engine, version_text or None)
    point = recorded.get("entry_points", {}).get(entry)
    if point is not None and point.get("parser") == "own":
        own = _entry_table(recorded, point)
        serve = _build(own, spellings, required)
        return serve, serve
    serve = _build(recorded, spellings, required)
    if "top" not in recorded:
        return serve, serve
    top = _build(recorded["top"], spellings, required)
    subparsers = top.add_subparsers(dest="subparser")
    subparsers._name_parser_map["serve"] = serve
    subparsers.choices = subparsers._name_parser_map
    return top, serve


def _at_recorded(version_text: str, table: str) -> bool:
    """Whether ``version_text`` is the recorded release ``table`` itself (not a version it stands in for)."""
    return _records.parse_version(version_text) == _records.parse_version(table)


def _entry_table(shared: dict, point: dict) -> dict:
    """An entry point's own parser: the shared table with the differences recorded for it."""
    without = set(point.get("without", ()))
    added = {a["dest"]: a for a in point.get("with", ())}
    actions = [added.pop(a["dest"], a) for a in shared["actions"] if a["dest"] not in without]
    settings = {k: v for k, v in point.items() if k not in ("parser", "words", "steps", "without", "with")}
    return {**shared, **settings, "actions": actions + list(added.values())}


# --- One parse ---------------------------------------------------------------------------------

@functools.lru_cache(maxsize=8192)
def parse(engine: str, table: str, version_text: str, args: tuple, required: bool = True,
          entry: str = "") -> Reading:
    """What ``engine``'s recorded parser ``table`` makes of its own arguments ``args`` (after the
    invocation words) at ``version_text``, through the entry point ``entry`` and its rewriting;
    memoized: a cluster's replicas repeat a handful of argvs. ``required`` False: options the
    engine requires are not demanded (see :func:`_parser`)."""
    points = _recorded(engine, table).get("entry_points")
    if points is not None and entry not in points:
        return Reading(FAILED, error=f"{engine} {table} has no entry point {entry}", exit_code=1, table=table)
    top, _ = _parser(engine, table, version_text, required, entry)
    record = _records.record(engine)
    if points is None:  # a table recorded before entry points were: the record's own
        words, steps = list(record.parser_words), [record.argv_rewrite] if record.argv_rewrite else []
    else:
        words, steps = points[entry].get("words", []), points[entry].get("steps", [])
    try:
        argv = [*words, *args]
        for step in steps:
            argv = _rewrites.REWRITES[step](argv, table, required)
        namespace = top.parse_args(argv)
    except _rewrites.Crash as crash:
        return Reading(FAILED, error=str(crash), exit_code=1, table=table)
    except _rewrites.TooDeep as deep:  # what the engine makes of it is past what this reader follows
        return Reading(UNKNOWN, error=str(deep), table=table)
    except _Stop as stop:
        return Reading(FAILED, error=str(stop), exit_code=stop.code, table=table)
    if not hasattr(namespace, _records.FLAG_DEST):
        return Reading(ABSENT, table=table)
    value = str(getattr(namespace, _records.FLAG_DEST))
    # At a recorded version its start check is the truth; between recordings the caller judges
    # the value by the spelling table (``_engines.verdicts.read_flag``).
    refused = refused_at_start(engine, table, value) if _at_recorded(version_text, table) else None
    if refused is not None:
        return Reading(FAILED, value=value, error=refused, exit_code=1, table=table, at_start=True)
    return Reading(VALUE, value=value, table=table)

