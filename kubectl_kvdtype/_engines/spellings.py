"""The argv reader's spellings as data: which option names each engine, at each recorded table,
reads as the flag, and every dtype some recorded release accepts. ``guard`` writes its admission
rules from these answers (``_judging.guard_rules``), so that the policies and ``find-flags`` meet
the same names; nothing here is a second reading: each answer is :func:`_engines.verdicts.classify_option`'s."""

from __future__ import annotations

import functools
from typing import Optional

from kubectl_kvdtype._engines import records as _records
from kubectl_kvdtype._engines import verdicts as _verdicts
from kubectl_kvdtype._kits.records import record_type


def _flag_name_candidates() -> tuple[str, ...]:
    """Every option name :func:`_engines.verdicts.classify_option` could call the flag: a prefix of it (``--k`` on) with
    any of its dashes after the first written as an underscore (the token itself starts with ``-``)."""
    names: list[str] = []
    for length in range(3, len(_records.FLAG) + 1):
        variants = [""]
        for position, char in enumerate(_records.FLAG[:length]):
            options = (char, "_") if char == "-" and position > 0 else (char,)
            variants = [v + o for v in variants for o in options]
        names += variants
    return tuple(names)


@record_type(frozen=True)
class FlagSpellings:
    """The option names an engine at one recorded table meets as the flag: ``located`` are those
    :func:`_engines.verdicts.find_dtype_flags` reports (read or not), ``read`` those the engine reads as the flag."""

    located: tuple[str, ...]
    read: tuple[str, ...]
    #: The names whose dotted option (``NAME.KEY``, which vLLM's rewriting turns into the flag with a
    #: JSON value) the reader reports, read or not, and those the engine reads; empty where no
    #: recorded entry point rewrites dotted options.
    dotted_located: tuple[str, ...] = ()
    dotted_read: tuple[str, ...] = ()


@functools.lru_cache(maxsize=64)
def flag_spellings(engine: Optional[str], table: Optional[str]) -> FlagSpellings:
    """What :func:`_engines.verdicts.classify_option` says of every candidate name, for ``engine``
    (None: any engine) at the recorded ``table`` (None with no engine): the reader's own answer, as data."""
    located, read, dotted_located, dotted_read = [], [], [], []
    for name in _flag_name_candidates():
        kind = _verdicts.classify_option(name, engine, table)
        if kind is not None:
            located.append(name)
            if kind[1]:
                read.append(name)
        for occurrence in _verdicts.find_dtype_flags([f"{name}.key", "value"], engine, table):
            if occurrence.spelling == _verdicts.DOTTED:
                dotted_located.append(name)
                if occurrence.read:
                    dotted_read.append(name)
    return FlagSpellings(tuple(located), tuple(read), tuple(dotted_located), tuple(dotted_read))


def spelling_groups(engine: str) -> list[tuple[str, FlagSpellings]]:
    """The recorded releases of ``engine`` where what it reads as the flag changes, oldest first:
    (the first release of the group, its spellings); a version below the first reads as it."""
    from kubectl_kvdtype._engines import parsers as _parsers

    groups: list[tuple[str, FlagSpellings]] = []
    for table in _parsers.recorded_versions(engine):
        found = flag_spellings(engine, table)
        if not groups or groups[-1][1] != found:
            groups.append((table, found))
    return groups


def reference_spellings(engine: str) -> FlagSpellings:
    """What ``engine`` reads at the operator's reference release (an unreadable version, a Pod)."""
    from kubectl_kvdtype._engines import parsers as _parsers

    return flag_spellings(engine, _parsers.table_version(engine, _records.record(engine).reference_version))


def recorded_dtypes() -> frozenset[str]:
    """Every value some recorded release of some engine accepts as the flag's value: its parser's
    choices, its recorded start check, else this tool's spelling table at that release."""
    from kubectl_kvdtype._engines import parsers as _parsers

    accepted: set[str] = set()
    for engine in _records.ENGINES:
        for table in _parsers.recorded_versions(engine):
            found = _verdicts.basis(engine, table).choices
            accepted |= found if found is not None else _records.spellings(engine, table).accepted
    return frozenset(accepted)


def tables_in_force() -> tuple[str, ...]:
    """The added table files (``KUBECTL_KVDTYPE_ENGINE_TABLES``) the run's records include."""
    from kubectl_kvdtype._engines import parsers as _parsers

    return tuple(_parsers.added_files())
