"""The engines' own argv rewriting before argparse runs, as each entry point does it.

vLLM's ``FlexibleArgumentParser.parse_args`` (underscores to dashes in option names, ``-O3``,
``--model``, dotted JSON keys) and ``sglang serve``'s (``--model-type``, the positional model).
A recorded table's entry point names its steps (``entry_points[...]["steps"]``), an engine record
its own (``argv_rewrite``): :data:`REWRITES` is the one table of them by name, which the recorded
parsers (``_engines.parsers``) apply and an added table file is checked against. A step the
engine itself would crash on raises :class:`Crash` (the process ends with a traceback, exit 1);
JSON nested deeper than this reader follows raises :class:`TooDeep`.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Optional, Sequence

from kubectl_kvdtype._engines import records as _records
from kubectl_kvdtype._kits import bounded as _bounded
from kubectl_kvdtype._kits.records import record_type

# --- vLLM's own argv pre-processing (FlexibleArgumentParser.parse_args) -----------------------

_DASHES = re.compile(r"(?<=--)[^\.]*")
#: vLLM reads a dotted key's value such as ``80g`` as a number from this release on.
_HUMAN_READABLE_SINCE = _records.known_version("0.29.0")


class TooDeep(Exception):
    """An argv entry (vLLM's dotted JSON options) nested deeper than ``_kits.bounded.MAX_DEPTH``: its
    reading is UNKNOWN rather than followed (this reader's own walks would recurse that deep)."""


class Crash(Exception):
    """vLLM's pre-processing raising: the process ends with a traceback, exit 1."""


def dashed(option: str) -> str:
    """``option`` (an option name, ``--`` first) with vLLM's underscores-to-dashes rewriting."""
    return _DASHES.sub(_dashed, option, count=1)


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
                    raise Crash("IndexError: list index out of range")
                model, rest = args[index + 1], index + 2
            else:
                model, rest = args[index][len("--model="):], index + 1
            args = ["serve", model, *args[1:index], *args[rest:]]
        if (required and len(args) > 1 and args[1].startswith("-")
                and not any(re.match(r"^--config(=.+|$)", a) for a in args)
                and any(re.match(r"^--served[-_]model[-_]name(=.+|$)", a) for a in args)):
            raise Crash("ValueError: `model` should be provided as the first positional argument when using "
                         "`vllm serve`. i.e. `vllm serve <model> --<arg> <value>`.")
    processed, _ = _entries(args)
    return _vllm_dotted(processed, human_readable=_human_readable(table))


def _human_readable(table: str) -> bool:
    return _records.known_version(table) >= _HUMAN_READABLE_SINCE


def _entries(args: Sequence[str]) -> tuple[list[str], list[int]]:
    """The entry-by-entry part of vLLM's rewriting (option names dashed, ``-O3``, ``--help=``):
    the entries it gives, and for each the index in ``args`` it came from."""
    processed: list[str] = []
    origins: list[int] = []
    for i, arg in enumerate(args):
        if arg.startswith("--help="):
            processed.append("--help")
        elif arg.startswith("--"):
            key, has_value, value = arg.partition("=")
            if "_" not in key:  # nothing to rewrite (most options)
                processed.append(arg)
            elif has_value:
                processed.append(f"{dashed(key)}={value}")
            else:
                processed.append(dashed(arg))
        elif arg.startswith("-O") and arg != "-O":
            processed += ["--optimization-level", arg[3:] if arg[2] == "=" else arg[2:]]
        elif arg == "-O" and i + 1 < len(args) and args[i + 1] in {"0", "1", "2", "3"}:
            processed.append("--optimization-level")
        else:
            processed.append(arg)
        origins += [i] * (len(processed) - len(origins))
    return processed, origins


def _dashed(match: re.Match) -> str:
    return match.group(0).replace("_", "-")


def _vllm_dotted(processed: list[str], human_readable: bool) -> list[str]:
    """``--json-arg.key value`` forms become ``--json-arg '{"key": value}'``, appended at the end."""
    plan = _dotted_plan(processed, human_readable, strict=True)
    result = [a for i, a in enumerate(processed) if i not in plan.delete]
    for key, value in plan.values.items():
        result += [key, json.dumps(value)]
    return result


class _DottedPlan:
    """What vLLM's rewriting does with the dotted options of its processed argv: the entries it
    takes out (``delete``), the options it appends with their merged JSON (``values``), and the
    option each dotted entry becomes (``keys``, by the entry's index)."""

    def __init__(self) -> None:
        self.delete: set[int] = set()
        self.values: dict[str, Any] = {}
        self.keys: dict[int, str] = {}
        self.given: dict[int, int] = {}  # a dotted entry's index: the index of the entry holding its value


def _dotted_plan(processed: list[str], human_readable: bool, strict: bool) -> _DottedPlan:
    """vLLM's own loop over dotted options. ``strict`` False (locating copies, not parsing): an entry
    the engine would crash on (no value after it) or nest too deep gets the value None, and no
    exception is raised."""
    plan = _DottedPlan()
    for i, arg in enumerate(processed):
        if i in plan.delete:
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
                    if strict:
                        raise Crash("IndexError: list index out of range")
                    plan.keys[i] = arg.rstrip("+").split(".")[0]
                    plan.values[plan.keys[i]] = None
                    continue
                value_str = processed[i + 1]
                plan.delete.add(i + 1)
                plan.given[i] = i + 1
            if arg.endswith("+"):
                arg = arg[:-1]
                value_str = json.dumps(list(value_str.split(",")))
            key, *keys = arg.split(".")
            plan.keys[i] = key
            plan.delete.add(i)
            try:
                value = _dotted_value(key, keys, value_str, human_readable)
            except TooDeep:
                if strict:
                    raise
                plan.values[key] = None
                continue
            nested = value
            for part in reversed(keys):
                nested = {part: nested}
            if key not in plan.values or plan.values[key] is not None:
                _merge(plan.values.setdefault(key, {}), nested)
    return plan


def _dotted_value(key: str, keys: list[str], value_str: str, human_readable: bool) -> Any:
    if len(keys) >= _bounded.MAX_DEPTH:
        raise TooDeep(f"not read: {key}.... nests its keys more than {_bounded.MAX_DEPTH} levels deep")
    try:
        return _bounded.loads(value_str)
    except _bounded.TooDeep:
        raise TooDeep(f"not read: the value of {key}.{keys[0] if keys else ''}... is JSON nested more than "
                      f"{_bounded.MAX_DEPTH} levels deep") from None
    except json.decoder.JSONDecodeError:
        return _human_readable_int(value_str) if human_readable else value_str


@record_type(frozen=True)
class DottedOption:
    """One argv entry vLLM's rewriting reads as a dotted option (``--kv-cache-dtype.x fp8``)."""

    option: str  # the option it becomes, dashed (``--kv-cache-dtype``)
    #: The JSON text the option gets, every dotted entry of it merged as the engine merges them,
    #: appended after the other arguments; None when the engine crashes on it or nests too deep.
    value: Optional[str]
    given: Optional[int]  # the index of the entry holding its value, None when it holds it itself (``=``)
    #: Whether the appended copy comes after a ``--`` the rewriting leaves in place (then it is no option).
    after_separator: bool


def dotted_options(args: Sequence[str], table: str) -> dict[int, DottedOption]:
    """Where vLLM's rewriting (the ``flexible`` step) reads a dotted option in ``args``, by the index of
    the entry, for locating the copies of a flag it makes (``_engines.verdicts``): its own loop, run
    over ``args`` as the engine runs it, so that a dotted entry's value, and an entry another dotted
    option takes as its value, are the engine's own."""
    processed, origins = _entries(args)
    if not any(a.startswith("-") and "." in a for a in processed):
        return {}
    plan = _dotted_plan(processed, _human_readable(table), strict=False)
    separator = any(a == "--" for i, a in enumerate(processed) if i not in plan.delete)
    found = {}
    for i, key in plan.keys.items():
        value = plan.values.get(key)
        given = plan.given.get(i)
        found[origins[i]] = DottedOption(key, None if value is None else json.dumps(value),
                                         None if given is None else origins[given], separator)
    return found


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


# --- SGLang's (sglang serve) -------------------------------------------------------------------

def _sglang_model_type(args: list[str], table: str, required: bool = True) -> list[str]:
    """``sglang serve`` takes ``--model-type X`` / ``--model-type=X`` out before parsing."""
    kept: list[str] = []
    i, backend = 0, "auto"
    while i < len(args):
        if args[i] == "--model-type":
            if i + 1 >= len(args):
                raise Crash("ValueError: Error: --model-type requires a value.")
            backend, i = args[i + 1], i + 2
            continue
        if args[i].startswith("--model-type="):
            backend = args[i].split("=", 1)[1]
        else:
            kept.append(args[i])
        i += 1
    if not backend:
        raise Crash("ValueError: Error: --model-type requires a non-empty value.")
    return kept


def _sglang_positional_model(args: list[str], table: str, required: bool = True) -> list[str]:
    """``sglang serve MODEL ...``: a first argument that is not an option becomes ``--model-path``."""
    return ["--model-path", args[0], *args[1:]] if args and not args[0].startswith("-") else args


#: The entry points' own argv pre-processing before argparse runs, by the name the recorded
#: tables (``entry_points[...]["steps"]``) or an engine record (``argv_rewrite``) give it.
REWRITES: dict[str, Callable[[list[str], str, bool], list[str]]] = {
    "flexible": _flexible_rewrite, "sglang_model_type": _sglang_model_type,
    "sglang_positional_model": _sglang_positional_model,
}
#: The steps that read dotted options (``--json-arg.key value``): a recorded table whose entry
#: points name one reads ``--kv-cache-dtype.x fp8`` as the flag (:func:`dotted_options`).
DOTTED_STEPS = frozenset({"flexible"})

