"""Read ``--kv-cache-dtype`` out of a container's argv exactly as the engine does.

Before the engine sees its argv, the kubelet expands ``$(VAR)`` in ``command``/``args`` from the
container's ``env`` (done here), and a ``sh -c`` line passes through a shell (``_engines.shell``);
the engine's own arguments then go through its entry point's rewriting (``_engines.rewrites``)
and its recorded parser (``_engines.parsers``), which decides. A value that depends on something
this reader cannot know (``valueFrom``, the shell's environment) is reported as unknown rather
than guessed.

Public API: :func:`read_container`, :func:`read_engine_args`, :func:`expand_kubernetes`,
:func:`too_long`; they return a ``_engines.parsers.Reading``.
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping, Optional, Sequence

from kubectl_kvdtype._engines import parsers as _parsers
from kubectl_kvdtype._engines import records as _records
from kubectl_kvdtype._engines import shell as _shell
from kubectl_kvdtype._engines.parsers import ABSENT, UNKNOWN, VALUE, Reading

#: The longest argv (command and args, or a role's extraArgs) read: argparse's time grows faster
#: than the argv (each unknown option is matched against every known one), so a longer one is
#: UNKNOWN, unparsed (docs/reference.md, "Limits"); engine argvs seen in practice are under 100.
MAX_ARGV_TOKENS = 256


def _could_hold_flag(args: Iterable[str]) -> bool:
    """Cheap pre-check: an entry mentions ``kv``, or abbreviates the flag (``--k``, ``--=x``).

    An argv without such an entry cannot set the flag, so it is not parsed at all."""
    for arg in args:
        lowered = arg.lower()
        if "kv" in lowered:
            return True
        name = lowered.split("=", 1)[0].replace("_", "-")
        if len(name) >= 2 and _records.FLAG.startswith(name) and arg != "--":
            return True
    return False


def read_engine_args(engine: str, version: object, args: Sequence[str], required: bool = True,
                     entry: str = "") -> Reading:
    """What ``engine`` at ``version`` makes of its own arguments (after ``vllm serve``/``launch_server``).

    Which values the flag accepts: the recorded parser's choices at a recorded version, else the
    spelling table's at ``version`` (``_engines.records.spellings``).
    ``required`` False: options the engine requires are not demanded (``_engines.parsers.parse``).
    ``entry`` names the entry point (the record's ``entry_points``; "": the engine's default).
    An argv without any entry that could be the flag is ABSENT without a parse (other options'
    mistakes are not this reader's business then). Parses are memoized by (engine, table,
    version, argv): a cluster's replicas repeat a handful of argvs.
    """
    args = tuple(a for a in args if isinstance(a, str))
    table = _parsers.table_version(engine, version)
    if not _could_hold_flag(args):
        return Reading(ABSENT, table=table)
    return _parsers.parse(engine, table, "" if version is None else str(version), args, required,
                          entry or _default_entry(engine))


def _default_entry(engine: str) -> str:
    points = _records.record(engine).entry_points
    return points[0][1] if points else ""


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


def read_container(engine: str, version: object, command: Sequence[str], args: Sequence[str],
                   env: object = None) -> Reading:
    """What the engine in a container runs with: Kubernetes expansion, shell, then its parser."""
    tokens = [t for t in list(command or []) + list(args or []) if isinstance(t, str)]
    if too_long(tokens):
        # Not "depends on ...": that wording is a variable's, which preflight lists as a look item.
        return Reading(UNKNOWN, error=f"not read: it is {too_long(tokens)}")
    tokens, unknown = expand_kubernetes(tokens, env)
    shell = _shell.shell_line(tokens)

    def read(argv: list[str], depends: Sequence[str] = ()) -> Reading:
        own, invoked, entry = _shell.entry_arguments(argv, engine)
        if own is None:
            return Reading(ABSENT, table=_parsers.table_version(engine, version))
        reading = read_engine_args(engine, version, own, required=invoked, entry=entry)
        return _depending(reading, depends) if depends else reading

    if shell is not None:
        script, positional = shell
        return _shell.read_line(script, positional, engine, _env_values(env), read)
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
    (``valueFrom`` ones, like ``envFrom`` and the image's, are not known: see ``_engines.shell``)."""
    if not isinstance(env, list):
        return {}
    values: dict[str, Optional[str]] = {}
    for item in env:
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            values[item["name"]] = None if "valueFrom" in item else _expand_one(str(item.get("value", "")), values)[0]
    return {name: value for name, value in values.items() if value is not None}


