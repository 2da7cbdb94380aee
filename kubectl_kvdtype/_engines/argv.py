"""Read ``--kv-cache-dtype`` out of an argv exactly as the engines do: their own parser, rebuilt.

The engines parse their command line with argparse. Rather than re-deriving argparse's rules
(abbreviations, ``=`` forms, value slots, ``--``, repetitions), this module builds a real
``argparse.ArgumentParser`` per engine version from the option tables recorded from the engines'
released wheels (``data/engine_options.json``, written by ``scripts/engine-tables``), applies
vLLM's own argv pre-processing (underscores to dashes in option names, ``-O3``, ``--model``,
dotted JSON keys), and lets that parser decide. ``tests/test_engine_corpus.py`` checks the result
against what the engines' real parsers did on a few thousand generated argvs.

Before the engine sees its argv, the kubelet expands ``$(VAR)`` in ``command``/``args`` from the
container's ``env``, and a ``sh -c`` line passes through a shell: both are done here too, and a
value that depends on something this reader cannot know (``valueFrom``, the shell's environment)
is reported as unknown rather than guessed.

Engines are named by their ``_engines.records`` record (table key, invocation words, argv rewriting):
nothing here branches on an engine's name.

Public API: :func:`read_container`, :func:`read_engine_args`, :func:`expand_kubernetes`,
:func:`engine_arguments`, :func:`table_version`, :func:`option_matches`,
:func:`shortest_flag_prefix`, :func:`recorded_choices`, :func:`start_check`, :func:`refused_at_start`,
and the :class:`Reading` they return.
"""

from __future__ import annotations

import argparse
import functools
import json
import pkgutil
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping, NoReturn, Optional, Sequence

from kubectl_kvdtype._engines import records as _records  # records and judgement only: verdicts stands on this module
from kubectl_kvdtype._engines import tables as _table_file
from kubectl_kvdtype._kits import bounded as _bounded
from kubectl_kvdtype._kits import files as _files

VALUE = "value"
ABSENT = "absent"
FAILED = "failed"
UNKNOWN = "unknown"

FLAG = "--kv-cache-dtype"
#: The longest argv (command and args, or a role's extraArgs) read: argparse's time grows faster
#: than the argv (each unknown option is matched against every known one), so a longer one is
#: UNKNOWN, unparsed (docs/reference.md, "Limits"); engine argvs seen in practice are under 100.
MAX_ARGV_TOKENS = 256
_DEST = "kv_cache_dtype"


@dataclass(frozen=True)
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


@functools.lru_cache(maxsize=1)
def _tables() -> dict:
    """The recorded option tables, loaded on first use (never at start-up: --version stays fast),
    with any extra table file added (:func:`add_tables`) merged in: its versions join the shipped
    ones, a version both record takes the extra file's table."""
    raw = pkgutil.get_data("kubectl_kvdtype._engines", "data/engine_options.json")
    if raw is None:  # pragma: no cover - a broken install
        raise RuntimeError("kubectl_kvdtype/_engines/data/engine_options.json is missing")
    data = json.loads(raw)
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
    try:
        raw = _files.read_json(path, TABLE_FILE_RULE)
    except _files.Unreadable as error:
        raise ValueError(f"the engine tables {path} {error.predicate}") from None
    except (OSError, ValueError) as error:  # UnicodeDecodeError, bad JSON, nested too deep
        raise ValueError(f"cannot read the engine tables {path}: {getattr(error, 'strerror', None) or error}") \
            from None
    try:
        extra = _table_file.validate(raw, _REWRITES, _build_all)
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


def added_by(engine: str, table: str) -> Optional[str]:
    """The extra table file (``add_tables``) a recorded version's table comes from; None: shipped."""
    key = _records.record(engine).table
    found = None
    for path, extra in _EXTRA.items():  # the last added wins, as when the tables are merged
        if table in extra["versions"].get(key, []):
            found = path
    return found


def clear_caches() -> None:
    """Forget everything derived from the tables (after :func:`add_tables`, or removing one)."""
    for cache in (_tables, _decoded, _table_version_cached, _long_options, shortest_flag_prefix, _parser, _read):
        cache.cache_clear()


def _recorded_key(version: str) -> _records.Version:
    """A recorded version, parsed: the tables hold released versions only, so it always reads."""
    key = _records.parse_version(version)
    if key is None:  # pragma: no cover - a broken engine_options.json
        raise RuntimeError(f"kubectl_kvdtype/_engines/data/engine_options.json records an unreadable version "
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
    """One stored table, decoded on first use: the file holds each as JSON text, so loading it
    decodes none (a run reads one or two of them)."""
    stored = _tables()["tables"][key][table]
    return json.loads(stored) if isinstance(stored, str) else stored


def recorded_choices(engine: str, table: str) -> Optional[tuple[str, ...]]:
    """The choices of ``--kv-cache-dtype`` in one recorded table; None when its parser checks none."""
    choices = next((e.get("choices") for e in _recorded(engine, table)["actions"] if e["dest"] == _DEST), None)
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
        name = _DASHES.sub(_dashed, name, count=1)
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
    shortest = len(FLAG)
    for table in tables:
        if not _recorded(engine, table)["allow_abbrev"]:
            continue
        near = [o for o in _long_options(engine, table) if o.startswith(FLAG[:3])]
        for length in range(len("--") + 1, len(FLAG)):
            near = [o for o in near if o.startswith(FLAG[:length])]
            if near == [FLAG]:
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
        # made once, serves every such check.
        if self._formatter is None:
            self._formatter = super()._get_formatter()
        return self._formatter

    def error(self, message: str) -> NoReturn:
        raise _Stop(message, 2)

    def exit(self, status: int = 0, message: Optional[str] = None) -> NoReturn:
        raise _Stop(f"exit {status}: {message}", status)


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
    the caller calls it unknown. argparse's message lists the recorded choices."""

    def __init__(self, recorded: Sequence[str], spellings: _records.Spellings) -> None:
        self._recorded = list(recorded)
        self._spellings = spellings

    def __contains__(self, value: object) -> bool:
        if not isinstance(value, str):
            return False
        return value in self._spellings.accepted or (value not in self._spellings.refused and value != "")

    def __iter__(self) -> Iterator[str]:
        return iter(self._recorded)


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
        action = container.add_argument(*options, action=_Exit, **kwargs)
    elif nargs == 0:
        action = container.add_argument(*options, action=_Switch, **kwargs)
    else:
        if nargs is not None:
            kwargs["nargs"] = nargs
        choices = entry.get("choices")
        if choices is not None:
            if entry["dest"] == _DEST and spellings is not None:
                choices = _Choices(choices, spellings)
            kwargs["choices"] = choices
        store = "append" if kind in ("append", "extend") else "store"
        action = container.add_argument(*options, action=store, **kwargs) if options \
            else container.add_argument(entry["dest"], action=store, **kwargs)
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
    between = _records.parse_version(version_text) != _records.parse_version(table)
    spellings = _records.spellings(engine, version_text or None) if between else None
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


def _entry_table(shared: dict, point: dict) -> dict:
    """An entry point's own parser: the shared table with the differences recorded for it."""
    without = set(point.get("without", ()))
    added = {a["dest"]: a for a in point.get("with", ())}
    actions = [added.pop(a["dest"], a) for a in shared["actions"] if a["dest"] not in without]
    settings = {k: v for k, v in point.items() if k not in ("parser", "words", "steps", "without", "with")}
    return {**shared, **settings, "actions": actions + list(added.values())}


# --- vLLM's own argv pre-processing (FlexibleArgumentParser.parse_args) -----------------------

_DASHES = re.compile(r"(?<=--)[^\.]*")


class _TooDeep(Exception):
    """An argv entry (vLLM's dotted JSON options) nested deeper than ``_kits.bounded.MAX_DEPTH``: its
    reading is UNKNOWN rather than followed (this reader's own walks would recurse that deep)."""


class _Crash(Exception):
    """vLLM's pre-processing raising: the process ends with a traceback, exit 1."""


def _flexible_rewrite(args: list[str], table: str, required: bool = True) -> list[str]:
    """vLLM's FlexibleArgumentParser.parse_args before argparse runs, for ``vllm serve``.

    ``required`` False: the model may come from the image's entrypoint, so its absence from the
    first position is not held against the argv."""
    if args and args[0] == "serve":
        index = next((i for i, a in enumerate(args) if a.startswith("--model") and re.match(r"^--model(=.+|$)", a)),
                     None)
        if index is not None:
            if args[index] == "--model":
                if index + 1 >= len(args):
                    raise _Crash("IndexError: list index out of range")
                model, rest = args[index + 1], index + 2
            else:
                model, rest = args[index][len("--model="):], index + 1
            args = ["serve", model, *args[1:index], *args[rest:]]
        if (required and len(args) > 1 and args[1].startswith("-")
                and not any(re.match(r"^--config(=.+|$)", a) for a in args)
                and any(re.match(r"^--served[-_]model[-_]name(=.+|$)", a) for a in args)):
            raise _Crash("ValueError: `model` should be provided as the first positional argument when using "
                         "`vllm serve`. i.e. `vllm serve <model> --<arg> <value>`.")
    processed: list[str] = []
    for i, arg in enumerate(args):
        if arg.startswith("--help="):
            processed.append("--help")
        elif arg.startswith("--"):
            key, has_value, value = arg.partition("=")
            if "_" not in key:  # nothing to rewrite (most options)
                processed.append(arg)
            elif has_value:
                processed.append(f"{_DASHES.sub(_dashed, key, count=1)}={value}")
            else:
                processed.append(_DASHES.sub(_dashed, arg, count=1))
        elif arg.startswith("-O") and arg != "-O":
            processed += ["--optimization-level", arg[3:] if arg[2] == "=" else arg[2:]]
        elif arg == "-O" and i + 1 < len(args) and args[i + 1] in {"0", "1", "2", "3"}:
            processed.append("--optimization-level")
        else:
            processed.append(arg)
    return _vllm_dotted(processed, human_readable=_recorded_key(table) >= _recorded_key("0.29.0"))


def _dashed(match: re.Match) -> str:
    return match.group(0).replace("_", "-")


def _vllm_dotted(processed: list[str], human_readable: bool) -> list[str]:
    """``--json-arg.key value`` forms become ``--json-arg '{"key": value}'``, appended at the end."""
    delete: set[int] = set()
    dict_args: dict[str, dict] = {}
    for i, arg in enumerate(processed):
        if i in delete:
            continue
        if arg.startswith("--") and "." not in arg:
            continue
        if arg.startswith("-") and "." in arg:
            if "=" in arg:
                arg, value_str = arg.split("=", 1)
                if "." not in arg:
                    continue
            else:
                if i + 1 >= len(processed):
                    raise _Crash("IndexError: list index out of range")
                value_str = processed[i + 1]
                delete.add(i + 1)
            if arg.endswith("+"):
                arg = arg[:-1]
                value_str = json.dumps(list(value_str.split(",")))
            key, *keys = arg.split(".")
            if len(keys) >= _bounded.MAX_DEPTH:
                raise _TooDeep(f"not read: {key}.... nests its keys more than {_bounded.MAX_DEPTH} levels deep")
            try:
                value = _bounded.loads(value_str)
            except _bounded.TooDeep:
                raise _TooDeep(f"not read: the value of {key}.{keys[0] if keys else ''}... is JSON nested more than "
                               f"{_bounded.MAX_DEPTH} levels deep") from None
            except json.decoder.JSONDecodeError:
                value = _human_readable_int(value_str) if human_readable else value_str
            nested = value
            for part in reversed(keys):
                nested = {part: nested}
            _merge(dict_args.setdefault(key, {}), nested)
            delete.add(i)
    result = [a for i, a in enumerate(processed) if i not in delete]
    for key, value in dict_args.items():
        result += [key, json.dumps(value)]
    return result


def _merge(original: dict, update: dict) -> None:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(original.get(key), dict):
            _merge(original[key], value)
        elif isinstance(value, list) and isinstance(original.get(key), list):
            original[key] += value
        else:
            original[key] = value


def _human_readable_int(text: str) -> Any:
    """vLLM 0.29+: ``80g`` in a dotted key's value is a number; anything else stays text."""
    value = text.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", value)
    if match:
        number, suffix = match.groups()
        decimal = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
        if suffix in decimal:
            return int(float(number) * decimal[suffix])
        try:
            return int(number) * {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[suffix]
        except ValueError:
            return text
    try:
        return int(value)
    except ValueError:
        return text


# --- Reading an engine's own arguments ----------------------------------------------------------

def _could_hold_flag(args: Iterable[str]) -> bool:
    """Cheap pre-check: an entry mentions ``kv``, or abbreviates the flag (``--k``, ``--=x``).

    An argv without such an entry cannot set the flag, so it is not parsed at all."""
    for arg in args:
        lowered = arg.lower()
        if "kv" in lowered:
            return True
        name = lowered.split("=", 1)[0].replace("_", "-")
        if len(name) >= 2 and FLAG.startswith(name) and arg != "--":
            return True
    return False


def read_engine_args(engine: str, version: object, args: Sequence[str], required: bool = True,
                     entry: str = "") -> Reading:
    """What ``engine`` at ``version`` makes of its own arguments (after ``vllm serve``/``launch_server``).

    Which values the flag accepts: the recorded parser's choices at a recorded version, else the
    spelling table's at ``version`` (``_engines.records.spellings``).
    ``required`` False: options the engine requires are not demanded (see :func:`_parser`).
    ``entry`` names the entry point (the record's ``entry_points``; "": the engine's default).
    An argv without any entry that could be the flag is ABSENT without a parse (other options'
    mistakes are not this reader's business then). Parses are memoized by (engine, table,
    version, argv): a cluster's replicas repeat a handful of argvs.
    """
    args = tuple(a for a in args if isinstance(a, str))
    if not _could_hold_flag(args):
        return Reading(ABSENT, table=table_version(engine, version))
    return _read(engine, table_version(engine, version), "" if version is None else str(version), args,
                 required, entry or _default_entry(engine))


def _default_entry(engine: str) -> str:
    points = _records.record(engine).entry_points
    return points[0][1] if points else ""


def _sglang_model_type(args: list[str], table: str, required: bool = True) -> list[str]:
    """``sglang serve`` takes ``--model-type X`` / ``--model-type=X`` out before parsing."""
    kept: list[str] = []
    i, backend = 0, "auto"
    while i < len(args):
        if args[i] == "--model-type":
            if i + 1 >= len(args):
                raise _Crash("ValueError: Error: --model-type requires a value.")
            backend, i = args[i + 1], i + 2
            continue
        if args[i].startswith("--model-type="):
            backend = args[i].split("=", 1)[1]
        else:
            kept.append(args[i])
        i += 1
    if not backend:
        raise _Crash("ValueError: Error: --model-type requires a non-empty value.")
    return kept


def _sglang_positional_model(args: list[str], table: str, required: bool = True) -> list[str]:
    """``sglang serve MODEL ...``: a first argument that is not an option becomes ``--model-path``."""
    return ["--model-path", args[0], *args[1:]] if args and not args[0].startswith("-") else args


#: The entry points' own argv pre-processing before argparse runs, by the name the recorded
#: tables (``entry_points[...]["steps"]``) or an engine record (``argv_rewrite``) give it.
_REWRITES: dict[str, Callable[[list[str], str, bool], list[str]]] = {
    "flexible": _flexible_rewrite, "sglang_model_type": _sglang_model_type,
    "sglang_positional_model": _sglang_positional_model,
}


@functools.lru_cache(maxsize=8192)
def _read(engine: str, table: str, version_text: str, args: tuple, required: bool = True,
          entry: str = "") -> Reading:
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
            argv = _REWRITES[step](argv, table, required)
        namespace = top.parse_args(argv)
    except _Crash as crash:
        return Reading(FAILED, error=str(crash), exit_code=1, table=table)
    except _TooDeep as deep:  # what the engine makes of it is past what this reader follows
        return Reading(UNKNOWN, error=str(deep), table=table)
    except _Stop as stop:
        return Reading(FAILED, error=str(stop), exit_code=stop.code, table=table)
    if not hasattr(namespace, _DEST):
        return Reading(ABSENT, table=table)
    value = str(getattr(namespace, _DEST))
    # At a recorded version its start check is the truth; between recordings the caller judges
    # the value by the spelling table (``_engines.verdicts.read_flag``).
    refused = refused_at_start(engine, table, value) \
        if _records.parse_version(version_text) == _records.parse_version(table) else None
    if refused is not None:
        return Reading(FAILED, value=value, error=refused, exit_code=1, table=table, at_start=True)
    return Reading(VALUE, value=value, table=table)


# --- From a container to the engine's arguments ------------------------------------------------

_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.\-]*)\)")


def expand_kubernetes(tokens: Sequence[str], env: object) -> tuple[list[str], list[str]]:
    """The kubelet's ``$(VAR)`` expansion of ``command``/``args`` from a container's ``env``.

    Returns (expanded tokens, names that could not be known). ``$$`` is a literal ``$``; a
    variable with a literal ``value`` (itself expanded from earlier entries) is substituted; one
    set by ``valueFrom``, or not defined in ``env`` (it may come from ``envFrom``; else the
    kubelet leaves the text as written), is unknown.
    """
    if not any("$" in token for token in tokens):
        return list(tokens), []  # nothing to expand (most argvs): env is not even read
    values: dict[str, Optional[str]] = {}
    unknown: list[str] = []
    for item in env if isinstance(env, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        if "valueFrom" in item:
            values[item["name"]] = None
        else:
            text, _ = _expand_one(str(item.get("value", "")), values)
            values[item["name"]] = text
    out = []
    for token in tokens:
        text, missing = _expand_one(token, values)
        out.append(text)
        unknown += missing
    return out, unknown


def _expand_one(text: str, values: Mapping[str, Optional[str]]) -> tuple[str, list[str]]:
    missing: list[str] = []

    def substitute(match: re.Match) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        value = values.get(name)
        if value is not None:
            return value
        missing.append(name)
        return match.group(0)

    return _VAR.sub(substitute, text), missing


_SHELLS = {"sh", "bash", "dash", "ash", "zsh", "ksh"}


def engine_arguments(argv: Sequence[str], engine: str) -> Optional[list[str]]:
    """The engine's own arguments in a container argv: what follows one of the engine record's
    invocations (``vllm serve``, ``-m sglang.launch_server``...); the whole argv when no
    invocation is written (the image's entrypoint runs the engine); None when the argv runs
    something else (a shell)."""
    own, _ = _own_arguments(argv, engine)
    return own


def _own_arguments(argv: Sequence[str], engine: str) -> tuple[Optional[list[str]], bool]:
    """(the engine's own arguments, whether the argv writes the invocation itself)."""
    own, invoked, _ = _entry_arguments(argv, engine)
    return own, invoked


def _entry_arguments(argv: Sequence[str], engine: str) -> tuple[Optional[list[str]], bool, str]:
    """(the engine's own arguments, whether the argv writes the invocation, its entry point)."""
    record = _records.record(engine)
    for i in range(len(argv)):
        for words in record.invocations:
            if _invokes_at(argv, i, words):
                entry = next((name for start, name in record.entry_points if _invokes_at(argv, i, start)), "")
                return list(argv[i + len(words):]), True, entry
    if argv and not argv[0].startswith("-") and "/" not in argv[0] and argv[0] in _SHELLS:
        return None, False, ""
    return list(argv), False, ""


def _invokes_at(argv: Sequence[str], i: int, words: Sequence[str]) -> bool:
    """Whether ``words`` start at ``argv[i]``: a program by its base name, ``x*`` by prefix."""
    if i + len(words) > len(argv):
        return False
    for offset, word in enumerate(words):
        token = argv[i + offset]
        if offset == 0 and not word.startswith("-"):
            token = token.rsplit("/", 1)[-1]
        if not (token.startswith(word[:-1]) if word.endswith("*") else token == word):
            return False
    return True


def read_container(engine: str, version: object, command: Sequence[str], args: Sequence[str],
                   env: object = None) -> Reading:
    """What the engine in a container runs with: Kubernetes expansion, shell, then its parser."""
    tokens = [t for t in list(command or []) + list(args or []) if isinstance(t, str)]
    if too_long(tokens):
        # Not "depends on ...": that wording is a variable's, which preflight lists as a look item.
        return Reading(UNKNOWN, error=f"not read: it is {too_long(tokens)}")
    tokens, unknown = expand_kubernetes(tokens, env)
    shell = _shell_script(tokens)

    def read(argv: list[str], depends: Sequence[str] = ()) -> Reading:
        own, invoked, entry = _entry_arguments(argv, engine)
        if own is None:
            return Reading(ABSENT, table=table_version(engine, version))
        reading = read_engine_args(engine, version, own, required=invoked, entry=entry)
        return _depending(reading, depends) if depends else reading

    if shell is not None:
        script, positional = shell
        return _from_shell(script, positional, engine, _env_values(env), read)
    if unknown and _could_hold_flag(tokens):
        return Reading(UNKNOWN, error=f"depends on $({unknown[0]}), set from outside the object (valueFrom)")
    return read(tokens)


def _depending(default: Reading, names: Sequence[str]) -> Reading:
    """UNKNOWN: the reading depends on variables the object does not set; ``default`` is what the
    engine makes of its argv when they are unset (the shell's defaults, ``${V:-w}``)."""
    if default.state == VALUE:
        then = f"default {default.value}"
    elif default.state == ABSENT:
        then = "unset: no flag, the engine's default"
    else:
        then = f"unset: fails, {default.error}"
    return Reading(UNKNOWN, error=f"depends on {', '.join(names)} ({then})", table=default.table, default=default)


def too_long(argv: Sequence[object]) -> Optional[str]:
    """Why ``argv`` is not read (it has more than ``MAX_ARGV_TOKENS`` entries), or None."""
    if len(argv) <= MAX_ARGV_TOKENS:
        return None
    return f"an argv of {len(argv)} entries, more than the {MAX_ARGV_TOKENS} this tool reads"


def _env_values(env: object) -> dict[str, str]:
    """The shell's environment as far as the object says: ``env`` entries with a literal value
    (``valueFrom`` ones, like ``envFrom`` and the image's, are not known: see :class:`_Shell`)."""
    if not isinstance(env, list):
        return {}
    values: dict[str, Optional[str]] = {}
    for item in env:
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            values[item["name"]] = None if "valueFrom" in item else _expand_one(str(item.get("value", "")), values)[0]
    return {name: value for name, value in values.items() if value is not None}


def _shell_script(tokens: list[str]) -> Optional[tuple[str, list[str]]]:
    """(script, positional parameters) for ``sh -c SCRIPT [$0 $1 ...]``; None otherwise."""
    if len(tokens) >= 3 and tokens[0].rsplit("/", 1)[-1] in _SHELLS:
        for i, token in enumerate(tokens[1:], start=1):
            if token.startswith("-") and "c" in token[1:] and not token.startswith("--"):
                if i + 1 < len(tokens):
                    return tokens[i + 1], tokens[i + 2:]
            elif not token.startswith("-"):
                break
    return None


_SEPARATORS = {";", "&&", "||", "|", "&", "\n", ";;", "(", ")"}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


#: Reserved words and operators that open or close a compound command: what runs inside
#: depends on conditions and loops this reader does not evaluate.
_COMPOUND = {"if", "then", "elif", "else", "fi", "case", "esac", "for", "while", "until", "do", "done",
             "{", "}", "!", "(", ")"}
#: Commands whose exit status is known whatever their words: the ones ``&&`` and ``||`` are
#: evaluated after (any other command's status is not known, and neither is what follows it).
_STATUS = {":": 0, "true": 0, "false": 1, "echo": 0}


def _from_shell(script: str, positional: list[str], engine: str, env: Mapping[str, str],
                read: Callable[..., Reading]) -> Reading:
    """What the engine makes of the argv a ``sh -c`` line starts it with (``read`` reads one argv).

    Commands run in order, so assignments (``V=w``, ``export V=w``, ``${V:=w}``) made before the
    engine's command are seen by it; a command's own prefix assignments (``V=w vllm ...``) are
    not (the shell expands the words first). ``&&`` and ``||`` run the next command by the last
    one's exit status where it is known (assignments, ``:``, ``true``, ``false``, ``echo``, and
    an engine start that fails: the line goes on unless it was ``exec``'d); after a command
    whose status is not known, or inside ``if``/``case``/loops/braces/subshells, whether a later
    command runs is not known either: an engine started there is UNKNOWN, never guessed."""
    raw = _split_shell(script)
    if raw is None:
        return Reading(UNKNOWN, error="the shell line cannot be split (unbalanced quotes)")
    shell = _Shell(dict(env), positional)
    flow = _Flow()
    command: list[str] = []
    for token in raw + [";"]:
        if token not in _SEPARATORS and not set(token) <= set(";&|()\n"):
            command.append(token)
            continue
        if token in ("(", ")"):
            flow.unsure = flow.unsure or f"a subshell {token} ... (control flow this reader does not evaluate)"
        found = flow.step(shell, command, engine, read) if command else None
        command = []
        if found is not None:
            return found
        flow.operator = token
    return flow.failed or Reading(ABSENT)


class _Flow:
    """Which commands of a shell line run: the operator before the next one and the last status."""

    def __init__(self) -> None:
        self.operator = ";"  # what precedes the command being run
        self.status: Optional[int] = 0  # the last command's exit status; None: not known
        self.unsure = ""  # why a later command may or may not run (or see other variables)
        self.failed: Optional[Reading] = None  # an engine start that failed, the line going on
        self.last = ""  # the last command run (its first word)

    def _runs(self) -> Optional[bool]:
        if self.operator == "&&":
            return None if self.status is None else self.status == 0
        if self.operator == "||":
            return None if self.status is None else self.status != 0
        return True

    def step(self, shell: "_Shell", words: list[str], engine: str, read: Callable[..., Reading]) -> Optional[Reading]:
        """Run one simple command (or skip it): a Reading when the line's outcome is decided."""
        runs = self._runs()
        if runs is False:  # skipped: the status stays
            return None
        if words[0] in _COMPOUND:
            self.unsure = self.unsure or f"the shell line's {words[0]} ... (control flow this reader does not evaluate)"
        elif runs is None:
            self.unsure = self.unsure or f"whether {self.last} succeeds (the shell line's {self.operator})"
        self.last = " ".join(words[:1] + (["..."] if len(words) > 1 else []))
        if self.unsure:
            found = shell.run(words, engine)
            if found is None:
                self.status = None
                return None
            return Reading(UNKNOWN, error=f"depends on {self.unsure}")
        if words[0] == "exit":
            return self.failed or Reading(ABSENT)
        executed = next((w for w in words if not _ASSIGNMENT.match(w)), "") == "exec"
        found = shell.run(words, engine)
        if found is None:
            self.status = 0 if shell.assigned_only else _STATUS.get(words[0])
            return None
        reading = found if isinstance(found, Reading) else read(*found)
        if reading.state == FAILED and not executed:  # the engine exited; the shell goes on
            self.status, self.failed = reading.exit_code or 1, reading
            return None
        return reading


class _Unknowable(Exception):
    """A shell expansion this reader does not evaluate (command substitution, ``${V%x}``, ...)."""


class _Shell:
    """The state of a POSIX shell running a ``sh -c`` line: variables, and which are unknown.

    Variables the object defines (its ``env`` literal values) and the line's own assignments are
    known. Any other (``valueFrom``, ``envFrom``, the image's environment) is read as unset, the
    shell's default, and recorded in ``used`` so the reading says it depends on it."""

    def __init__(self, variables: dict[str, str], positional: list[str]) -> None:
        self.variables = variables
        self.positional = positional
        self.depends: dict[str, tuple[str, ...]] = {}  # a variable set from unknown ones: those
        self.used: list[str] = []  # unknown variables the current command's words read
        self.assigned_only = False  # whether the last command run was assignments only (status 0)

    def run(self, words: list[str], engine: str) -> Any:
        """Run one simple command: None, or what it makes of the engine when it starts it."""
        count = next((i for i, w in enumerate(words) if not _ASSIGNMENT.match(w)), len(words))
        rest = words[count:]
        if rest[:1] in (["export"], ["readonly"]):
            words, rest = words[:count] + [w for w in rest[1:] if _ASSIGNMENT.match(w)], []
        self.assigned_only = not rest
        if not rest:  # assignments only: they last for the rest of the line
            for word in words:
                self._assign(word)
            return None
        if rest[0] == "exec":
            rest = rest[1:]
        self.used = []
        argv, unknowable = [], ""
        for word in rest:
            try:
                argv += self.fields(word)
            except _Unknowable as why:
                argv.append(word)
                unknowable = unknowable or str(why)
        if not _invokes(argv, engine):
            return None
        if unknowable:
            return Reading(UNKNOWN, error=f"depends on {unknowable}, which this reader does not evaluate")
        return argv, list(dict.fromkeys(self.used))

    def _assign(self, word: str) -> None:
        name, _, value = word.partition("=")
        self.used = []
        try:
            self.variables[name] = "".join(text for text, _ in self._pieces(value, quoted=False, assigning=True))
        except _Unknowable:
            self.variables[name] = ""
            self.used = [name]
        if self.used:
            self.depends[name] = tuple(dict.fromkeys(self.used))
        else:
            self.depends.pop(name, None)

    def fields(self, word: str) -> list[str]:
        """One word after parameter expansion, field splitting (default IFS) and quote removal."""
        if word == '"$@"':
            return list(self.positional[1:])
        fields: list[str] = []
        current, started = "", False
        for text, splittable in self._pieces(word, quoted=False):
            if not splittable:
                current, started = current + text, True
                continue
            parts = re.split(r"[ \t\n]+", text)
            for k, part in enumerate(parts):
                if k and (started or current):
                    fields.append(current)
                if k:
                    current, started = "", False
                current += part
        if started or current:
            fields.append(current)
        return fields

    def _pieces(self, word: str, quoted: bool, assigning: bool = False,
                expanded: bool = False) -> list[tuple[str, bool]]:
        """(text, subject to field splitting) pieces of ``word``; ``quoted``: inside double quotes;
        ``expanded``: ``word`` is a ``${V:-word}`` operand (its unquoted text splits too)."""
        pieces: list[tuple[str, bool]] = []
        i, quote = 0, '"' if quoted else ""
        splits = expanded and not assigning
        while i < len(word):
            char = word[i]
            if quote == "'":
                quote = "" if char == "'" else quote
                pieces.append(("" if char == "'" else char, False))
            elif char == "'" and not quote:
                quote = "'"
                pieces.append(("", False))
            elif char == '"' and not quoted:
                quote = "" if quote else '"'
                pieces.append(("", False))
            elif char == "\\" and i + 1 < len(word):
                following = word[i + 1]
                if quote and following not in '$`"\\\n':
                    pieces.append((char + following, False))
                else:
                    pieces.append(("" if following == "\n" else following, False))
                i += 1
            elif char == "`":
                raise _Unknowable("a command substitution (`...`)")
            elif char == "$":
                length, value_pieces = self._parameter(word, i, bool(quote), assigning)
                pieces += value_pieces
                i += length
                continue
            else:
                pieces.append((char, splits and not quote))
            i += 1
        return pieces

    def _parameter(self, word: str, i: int, quoted: bool, assigning: bool) -> tuple[int, list[tuple[str, bool]]]:
        """(length, pieces) of the expansion at ``word[i]`` (a ``$``)."""
        rest = word[i + 1:]
        if rest.startswith("("):
            raise _Unknowable("a command substitution ($(...))")
        if rest.startswith("{"):
            end = _closing_brace(word, i + 1)
            inner = word[i + 2:end]
            match = re.match(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#]", inner)
            if not match or inner.startswith("#") and len(inner) > 1:
                raise _Unknowable(f"${{{inner}}}")
            name, operation = match.group(0), inner[match.end():]
            operator = re.match(r":?[-=+?]", operation)
            if operation and not operator:
                raise _Unknowable(f"${{{inner}}}")
            pieces = self._operate(name, operator.group(0) if operator else "",
                                   operation[operator.end():] if operator else "", quoted, assigning)
            return end - i + 1, pieces
        match = re.match(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]|[@*#]", rest)
        if not match:
            if rest[:1] in ("$", "?", "!", "-"):
                raise _Unknowable(f"${rest[:1]}")
            return 1, [("$", False)]
        return 1 + match.end(), self._operate(match.group(0), "", "", quoted, assigning)

    def _operate(self, name: str, operator: str, operand: str, quoted: bool,
                 assigning: bool) -> list[tuple[str, bool]]:
        value = self._lookup(name)
        is_set = value is not None
        null = not value
        if operator in ("-", ":-", "=", ":=") and (not is_set or (operator.startswith(":") and null)):
            pieces = self._pieces(operand, quoted, assigning, expanded=True)
            if operator.endswith("="):  # assigned now, but from a value the object may set
                self.variables[name] = "".join(text for text, _ in pieces)
                self.depends[name] = tuple(dict.fromkeys(self.used))
            return pieces
        if operator in ("+", ":+"):
            if is_set and not (operator == ":+" and null):
                return self._pieces(operand, quoted, assigning, expanded=True)
            return []
        if operator.endswith("?") and (not is_set or (operator == ":?" and null)):
            raise _Unknowable(f"{name} (the shell exits when it is unset)")
        return [(value or "", not quoted and not assigning)]

    def _lookup(self, name: str) -> Optional[str]:
        if name.isdigit():
            return self.positional[int(name)] if int(name) < len(self.positional) else None
        if name in ("@", "*"):
            return " ".join(self.positional[1:])
        if name == "#":
            return str(max(len(self.positional) - 1, 0))
        self.used += self.depends.get(name, ())
        if name not in self.variables:
            self.used.append(name)
            return None
        return self.variables[name]


def _closing_brace(word: str, start: int) -> int:
    """The index of the ``}`` closing the ``{`` at ``word[start]`` (quotes and nesting skipped)."""
    depth, quote = 0, ""
    for i in range(start, len(word)):
        char = word[i]
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return i
    raise _Unknowable(f"an unclosed ${{ in {word!r}")


def _split_shell(script: str) -> Optional[list[str]]:
    """Words and operators (``;``, ``&&``, ``|``, newline, ...) of a shell line, quotes kept.

    Like ``shlex`` in punctuation-aware mode, but the quotes stay in each word so that expansion
    (:class:`_Shell`) knows what was single-quoted, and a ``${...}`` or ``$(...)`` stays one
    piece of its word. None when a quote is left open."""
    words: list[str] = []
    word, quote, i, depth = "", "", 0, 0
    while i < len(script):
        char = script[i]
        if quote:
            word += char
            if char == quote:
                quote = ""
            elif char == "\\" and quote == '"' and i + 1 < len(script):
                i += 1
                word += script[i]
        elif char in "'\"":
            quote, word = char, word + char
        elif char == "\\" and i + 1 < len(script):
            word += char + script[i + 1]
            i += 1
        elif char == "$" and script[i + 1:i + 2] in ("{", "("):
            depth += 1
            word += char + script[i + 1]
            i += 1
        elif depth and char in "})":
            depth -= 1
            word += char
        elif depth:
            word += char
        elif char in " \t\r":
            if word:
                words.append(word)
            word = ""
        elif char in ";&|()\n":
            if word:
                words.append(word)
            word = ""
            operator = char
            while i + 1 < len(script) and script[i + 1] in ";&|" and char != "\n":
                i += 1
                operator += script[i]
            words.append(operator)
        elif char == "#" and not word:
            while i < len(script) and script[i] != "\n":
                i += 1
            continue
        else:
            word += char
        i += 1
    if quote or depth:
        return None
    if word:
        words.append(word)
    return words


def _invokes(argv: list[str], engine: str) -> bool:
    own = engine_arguments(argv, engine)
    return own is not None and len(own) < len(argv)
