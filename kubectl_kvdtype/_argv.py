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

Engines are named by their ``_engines`` record (table key, invocation words, argv rewriting):
nothing here branches on an engine's name.

Public API: :func:`read_container`, :func:`read_engine_args`, :func:`expand_kubernetes`,
:func:`engine_arguments`, :func:`table_version`, :func:`option_matches`,
:func:`shortest_flag_prefix`, and the :class:`Reading` they return.
"""

from __future__ import annotations

import argparse
import functools
import json
import pkgutil
import re
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, NoReturn, Optional, Sequence

from kubectl_kvdtype import _engine_records as _engines  # records and judgement only: _engines stands on this module

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

#: ``validity(engine, version, value)``: True accepted, False refused, None not known.
Validity = Callable[[str, object, str], Optional[bool]]


@dataclass(frozen=True)
class Reading:
    """What an engine makes of its argv, for ``--kv-cache-dtype``.

    ``state`` is VALUE (the engine runs with ``value``), ABSENT (no flag: the engine's default),
    FAILED (the engine exits at startup; ``error`` is the message it prints, ``exit_code`` its
    status) or UNKNOWN (the value depends on something not in the object; ``error`` says what).
    """

    state: str
    value: Optional[str] = None
    error: str = ""
    exit_code: int = 0
    table: str = ""  # the recorded engine version whose option table decided


# --- Tables ------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _tables() -> dict:
    """The recorded option tables, loaded on first use (never at start-up: --version stays fast)."""
    raw = pkgutil.get_data("kubectl_kvdtype", "data/engine_options.json")
    if raw is None:  # pragma: no cover - a broken install
        raise RuntimeError("kubectl_kvdtype/data/engine_options.json is missing")
    return json.loads(raw)


def _version_key(text: object) -> Optional[tuple[int, ...]]:
    match = re.match(r"^\s*[vV]?(\d+)(?:\.(\d+))?(?:\.(\d+))?", str(text)) if isinstance(text, (str, int, float)) \
        else None
    return tuple(int(p or 0) for p in match.groups()) if match else None


def _recorded_key(version: str) -> tuple[int, ...]:
    """The key of a recorded version: the tables hold released versions only, so it always reads."""
    key = _version_key(version)
    if key is None:  # pragma: no cover - a broken engine_options.json
        raise RuntimeError(f"kubectl_kvdtype/data/engine_options.json records an unreadable version {version!r}")
    return key


def recorded_versions(engine: str) -> list[str]:
    """The engine versions whose parsers were recorded, oldest first."""
    return list(_tables()["versions"][_engines.record(engine).table])


def _recorded(engine: str, table: str) -> dict:
    return _tables()["tables"][_engines.record(engine).table][table]


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
    wanted = _version_key(version)
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
    if _engines.record(engine).argv_rewrite == "flexible" and name.startswith("--"):
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
    shortest = len(FLAG)
    for table in recorded_versions(engine):
        if not _recorded(engine, table)["allow_abbrev"]:
            continue
        options = _long_options(engine, table)
        for length in range(len("--") + 1, len(FLAG)):
            if [o for o in options if o.startswith(FLAG[:length])] == [FLAG]:
                shortest = min(shortest, length)
                break
    return shortest


_table_version_cached = functools.lru_cache(maxsize=256)(_table_version)


# --- The parser, rebuilt from a table --------------------------------------------------------

class _Stop(Exception):
    """The parser gave up: argparse's error() (exit 2), or an early exit (-h: exit 0)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _Stop(message, 2)

    def exit(self, status: int = 0, message: Optional[str] = None) -> NoReturn:
        raise _Stop(f"exit {status}: {message}", status)


class _Switch(argparse.Action):
    """Any option that takes no value (store_true, store_const, count, enable/disable pairs)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, True)


class _Exit(_Switch):
    """-h/--help, --version: the engine prints and exits 0 without starting."""

    def __call__(self, parser, namespace, values, option_string=None):
        parser.exit()


class _Choices:
    """The flag's choices: membership asks the spelling-by-version judge, the table breaks ties."""

    def __init__(self, recorded: Sequence[str], accepts: Callable[[str], bool]) -> None:
        self._recorded = list(recorded)
        self._accepts = accepts

    def __contains__(self, value: object) -> bool:
        return isinstance(value, str) and self._accepts(value)

    def __iter__(self):
        return iter(self._recorded)


def _build(table: dict, accepts: Optional[Callable[[str], bool]], required: bool = True) -> _Parser:
    parser = _Parser(prog=table["prog"], add_help=False, allow_abbrev=table["allow_abbrev"],
                     prefix_chars=table["prefix_chars"],
                     fromfile_prefix_chars=table.get("fromfile_prefix_chars"))
    groups = {dest: parser.add_mutually_exclusive_group() for group in table.get("mutually_exclusive", [])
              for dest in group}
    for entry in table["actions"]:
        if entry["action"] == "parsers":
            continue
        _add(groups.get(entry["dest"], parser), entry, accepts, required)
    # Every parse walks ``_actions`` twice (filling in defaults, then looking for missing required
    # arguments): hundreds of options, most of a parse's cost. Options are found through
    # ``_option_string_actions``, and with no defaults (see _add) an option that is neither
    # positional nor required plays no part in those walks: keep only the ones that do.
    parser._actions[:] = [a for a in parser._actions if not a.option_strings or a.required]  # shared with groups
    return parser


def _add(container, entry: dict, accepts: Optional[Callable[[str], bool]], required: bool) -> None:
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
            kwargs["choices"] = _Choices(choices, accepts) if entry["dest"] == _DEST and accepts else choices
        store = "append" if kind in ("append", "extend") else "store"
        action = container.add_argument(*options, action=store, **kwargs) if options \
            else container.add_argument(entry["dest"], action=store, **kwargs)
    if "shown" in entry:
        action.option_strings = list(entry["shown"])
    # No defaults: "not given" stays distinguishable from any value, and argparse skips setting
    # hundreds of attributes per parse (most of a parse's cost otherwise).
    action.default = argparse.SUPPRESS


@functools.lru_cache(maxsize=64)
def _parser(engine: str, table: str, version_text: str, validity: Optional[Validity], required: bool = True):
    """(top-level parser, engine parser) for one engine version; memoized, they are reused.

    ``required`` False drops the options the engine requires (SGLang's ``--model-path``): when
    the image's entrypoint starts the engine, what it passes before the container's arguments is
    not in the object, so their absence is not held against the argv."""
    recorded = _recorded(engine, table)
    accepts = None
    if validity is not None:
        # At a recorded version its parser's list is the truth; between recordings a spelling
        # neither list knows may be new, so it passes here and the caller calls it unknown.
        recorded_here = _version_key(version_text) == _version_key(table)

        def accepts(value: str) -> bool:
            verdict = validity(engine, version_text or None, value)
            if verdict is None:  # a spelling the judge does not know: the recorded parser's list
                return value in recorded_choices or (not recorded_here and value != "")
            return verdict
        recorded_choices = next((e.get("choices") or [] for e in recorded["actions"] if e["dest"] == _DEST), [])
    serve = _build(recorded, accepts, required)
    if "top" not in recorded:
        return serve, serve
    top = _build(recorded["top"], accepts, required)
    subparsers = top.add_subparsers(dest="subparser")
    subparsers._name_parser_map["serve"] = serve
    subparsers.choices = subparsers._name_parser_map
    return top, serve


def _judge_validity(engine: str, version: object, value: str) -> Optional[bool]:
    verdict = _engines.judge(engine, version, value).verdict  # the spelling-by-version table
    return True if verdict == _engines.ACCEPTED else False if verdict == _engines.REJECTED else None


# --- vLLM's own argv pre-processing (FlexibleArgumentParser.parse_args) -----------------------

_DASHES = re.compile(r"(?<=--)[^\.]*")


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
    return _vllm_dotted(processed, human_readable=_recorded_key(table) >= (0, 29, 0))


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
            try:
                value = json.loads(value_str)
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


def _human_readable_int(text: str):
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


def read_engine_args(engine: str, version: object, args: Sequence[str],
                     validity: Optional[Validity] = _judge_validity, required: bool = True) -> Reading:
    """What ``engine`` at ``version`` makes of its own arguments (after ``vllm serve``/``launch_server``).

    ``validity`` decides which values the flag accepts at ``version`` (default: the plugin's
    spelling-by-version table in ``_engines``); None checks against the recorded choices only.
    ``required`` False: options the engine requires are not demanded (see :func:`_parser`).
    An argv without any entry that could be the flag is ABSENT without a parse (other options'
    mistakes are not this reader's business then). Parses are memoized by (engine, table,
    version, argv): a cluster's replicas repeat a handful of argvs.
    """
    args = tuple(a for a in args if isinstance(a, str))
    if not _could_hold_flag(args):
        return Reading(ABSENT, table=table_version(engine, version))
    return _read(engine, table_version(engine, version), "" if version is None else str(version), args, validity,
                 required)


#: The engines' own argv rewriting before argparse runs, by the name an engine record gives it.
_REWRITES: dict[str, Callable[[list[str], str, bool], list[str]]] = {"flexible": _flexible_rewrite}


@functools.lru_cache(maxsize=8192)
def _read(engine: str, table: str, version_text: str, args: tuple, validity: Optional[Validity],
          required: bool = True) -> Reading:
    top, serve = _parser(engine, table, version_text, validity, required)
    record = _engines.record(engine)
    try:
        argv = [*record.parser_words, *args]
        if record.argv_rewrite:
            argv = _REWRITES[record.argv_rewrite](argv, table, required)
        namespace = top.parse_args(argv)
    except _Crash as crash:
        return Reading(FAILED, error=str(crash), exit_code=1, table=table)
    except _Stop as stop:
        return Reading(FAILED, error=str(stop), exit_code=stop.code, table=table)
    if not hasattr(namespace, _DEST):
        return Reading(ABSENT, table=table)
    return Reading(VALUE, value=str(getattr(namespace, _DEST)), table=table)


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
    invocations = _engines.record(engine).invocations
    for i in range(len(argv)):
        for words in invocations:
            if _invokes_at(argv, i, words):
                return list(argv[i + len(words):]), True
    if argv and not argv[0].startswith("-") and "/" not in argv[0] and argv[0] in _SHELLS:
        return None, False
    return list(argv), False


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
                   env: object = None, validity: Optional[Validity] = _judge_validity) -> Reading:
    """What the engine in a container runs with: Kubernetes expansion, shell, then its parser."""
    tokens = [t for t in list(command or []) + list(args or []) if isinstance(t, str)]
    if too_long(tokens):
        return Reading(UNKNOWN, error=too_long(tokens) or "")
    tokens, unknown = expand_kubernetes(tokens, env)
    shell = _shell_script(tokens)
    if shell is not None:
        script, positional = shell
        found = _from_shell(script, positional, engine, _env_values(env))
        if isinstance(found, Reading):
            return found
        tokens = found
    elif unknown and _could_hold_flag(tokens):
        return Reading(UNKNOWN, error=f"depends on $({unknown[0]}), set from outside the object (valueFrom)")
    own, invoked = _own_arguments(tokens, engine)
    if own is None:
        return Reading(ABSENT, table=table_version(engine, version))
    return read_engine_args(engine, version, own, validity, required=invoked)


def too_long(argv: Sequence[object]) -> Optional[str]:
    """Why ``argv`` is not read (it has more than ``MAX_ARGV_TOKENS`` entries), or None."""
    if len(argv) <= MAX_ARGV_TOKENS:
        return None
    return f"depends on an argv of {len(argv)} entries, more than the {MAX_ARGV_TOKENS} this tool reads"


def _env_values(env: object) -> dict[str, str]:
    return {i["name"]: str(i.get("value", "")) for i in env if isinstance(i, dict) and isinstance(i.get("name"), str)
            and "valueFrom" not in i} if isinstance(env, list) else {}


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


def _from_shell(script: str, positional: list[str], engine: str, env: Mapping[str, str]):
    """The argv the shell line starts the engine with, or a Reading when that cannot be known."""
    raw = _split_shell(script)
    if raw is None:
        return Reading(UNKNOWN, error="the shell line cannot be split (unbalanced quotes)")
    variables: dict[str, Optional[str]] = dict(env)
    command: list[tuple[str, bool]] = []
    commands: list[list[tuple[str, bool]]] = []
    for token in raw + [";"]:
        if token in _SEPARATORS or set(token) <= set(";&|()\n"):
            if command:
                commands.append(command)
            command = []
            continue
        if not command and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", token):
            name, _, value = token.partition("=")
            value_words, known = _shell_words(value, variables, positional, split=False)
            variables[name] = " ".join(value_words) if known else None  # None: unknown
            continue
        if not command and token in ("export", "exec"):
            continue
        command.append((token, True))
    for words in commands:
        argv: list[str] = []
        known = True
        for token, _ in words:
            expanded, ok = _shell_words(token, variables, positional, split=True)
            argv += expanded
            known &= ok
        if engine_arguments(argv, engine) is not None and _invokes(argv, engine):
            if not known:
                return Reading(UNKNOWN, error="the engine's arguments depend on the shell's environment")
            return argv
    return Reading(ABSENT)


def _split_shell(script: str) -> Optional[list[str]]:
    """Words and operators (``;``, ``&&``, ``|``, newline, ...) of a shell line, quotes kept.

    Like ``shlex`` in punctuation-aware mode, but the quotes stay in each word so that expansion
    (:func:`_shell_words`) knows what was single-quoted. None when a quote is left open."""
    words: list[str] = []
    word, quote, i = "", "", 0
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
    if quote:
        return None
    if word:
        words.append(word)
    return words


def _invokes(argv: list[str], engine: str) -> bool:
    own = engine_arguments(argv, engine)
    return own is not None and len(own) < len(argv)


def _shell_words(token: str, variables: Mapping[str, Optional[str]], positional: list[str],
                 split: bool) -> tuple[list[str], bool]:
    """One non-posix shlex token: quotes removed, ``$VAR``/``${VAR}``/``"$@"`` expanded."""
    words: list[str] = [""]
    known = True
    i, quote = 0, ""
    while i < len(token):
        char = token[i]
        if quote != "'" and char == "$":
            match = re.match(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*)|([@*0-9]))", token[i:])
            if match:
                name = match.group(1) or match.group(2) or match.group(3)
                if name in "@*" and name:
                    values = positional[1:]
                    if quote == '"' and name == "@":
                        words[-1] += values[0] if values else ""
                        words += values[1:]
                    else:
                        words[-1] += " ".join(values)
                elif name.isdigit():
                    words[-1] += positional[int(name)] if int(name) < len(positional) else ""
                else:
                    value = variables.get(name)
                    if value is None:
                        known = False
                        value = ""
                    if split and not quote:
                        parts = value.split()
                        if parts:
                            words[-1] += parts[0]
                            words += parts[1:]
                    else:
                        words[-1] += value
                i += len(match.group(0))
                continue
        if quote and char == quote:
            quote = ""
        elif not quote and char in "'\"":
            quote = char
        elif char == "\\" and quote != "'" and i + 1 < len(token):
            i += 1
            words[-1] += token[i]
        else:
            words[-1] += char
        i += 1
    return words, known
