"""The one answer about what an engine does with an argv, and with a ``--kv-cache-dtype`` spelling.

This is the one place that encodes docs/engines.md ("Which spellings each engine accepts", "How
each engine reads the flag") as answers. The facts are below it: each engine is one
``_engines.records.Engine`` record (names, reference version, which values it accepts at which
version, which spellings mean the same, its recorded parser table, how the operator and a container
start it), and nothing here branches on an engine's name. What an engine makes of an argv is
decided by its own parser rebuilt from the recorded tables (``_engines.parsers``), which
``_engines.argv`` reads a container's argv with; this module locates the copies of the flag and
turns the parser's answer into a judgement (:func:`read_flag`, the one question every subcommand
asks; :func:`renders` is ``check``'s case of it). At a recorded version the recorded choices (or,
where the parser lists none, the recorded start check) decide a spelling; the hand-kept windows
only where none cover the version (:func:`basis`, :func:`judge`). The rest of the package asks
questions; only this module answers them. Its answers keep their own names (:func:`judge`,
:func:`suggest`, :func:`remedy`); the spelling table's are ``_engines.records.judge_spelling``,
``suggest_by`` and ``remedy_by``."""

from __future__ import annotations

import functools
import json
import re
import shlex
from typing import Iterable, Optional, Sequence

from kubectl_kvdtype._engines import records as _records
from kubectl_kvdtype._kits.memo import memoized
from kubectl_kvdtype._kits.records import record_type, replace

# --- Which table decides ----------------------------------------------------------------------


@record_type(frozen=True)
class Basis:
    """What an engine at a version is judged with: which recorded parser, and whose choices.

    At a recorded version whose parser lists the flag's choices, those choices decide
    (``choices``); where its parser lists none, the engine's own check at start, recorded with
    it, decides (``choices`` are what that check accepts, ``at_start`` True). Anywhere else (a
    version between recordings, newer than the newest or older than the oldest) the hand-kept
    spelling table decides, and ``note`` says which recorded parser stood in for the version; a
    refused value then fails where it fails at that parser's release (``at_start``).
    """

    at: str  # the version judged at: the consumer's own text, else the engine's reference version
    table: str  # the recorded version whose parser (options, abbreviations) is used
    choices: Optional[frozenset[str]]  # the recorded values that decide; None: the spelling table does
    note: str = ""  # "" when ``at`` is a recorded release
    at_start: bool = False  # the table's parser lets any value through; the engine checks it at start
    #: The extra table file (KUBECTL_KVDTYPE_ENGINE_TABLES) ``table`` comes from; "" for a shipped one.
    added: str = ""
    #: The added table is for a release this tool ships a table for, and replaces that one.
    replaces: bool = False

    @property
    def added_clause(self) -> str:
        """What a verdict resting on an added table says of it ("" when the table is shipped)."""
        if not self.added:
            return ""
        if self.replaces:
            return f"by the {self.table} table added from {self.added}, in place of the one shipped with this tool"
        return f"by the {self.table} table added from {self.added}, not shipped with this tool"


def basis(engine: str, version: object) -> Basis:
    """The :class:`Basis` of ``engine`` (canonical name) at ``version`` (free text or None); memoized.

    A version that is not text (a hand-written manifest's list or mapping) is no version at all."""
    return _basis_cached(engine, version if isinstance(version, (str, int, float)) else None)


def _basis(engine: str, version: object) -> Basis:
    from kubectl_kvdtype._engines import parsers as _parsers  # the tables load on first use, never at start-up

    parsed = _records.parse_version(version)
    at_text = str(version).strip() if parsed is not None else _records.record(engine).reference_version
    at = parsed if parsed is not None else _records.known_version(at_text)
    note = ""
    if parsed is None and isinstance(version, str) and version.strip():
        note = f"{engine} version {version.strip()!r} is unreadable: judged at the reference version {at_text}"
    table = _parsers.table_version(engine, at_text)
    choices = _parsers.recorded_choices(engine, table)
    at_start = _parsers.start_check(engine, table) if choices is None else None
    added = _parsers.added_by(engine, table) or ""
    replaces = bool(added) and _parsers.ships(engine, table)
    if _records.known_version(table) == at:
        decides = frozenset(choices) if choices is not None else at_start
        return Basis(at_text, table, decides, note, at_start is not None, added, replaces)
    recorded = _parsers.recorded_versions(engine)
    if at > _records.known_version(recorded[-1]):
        where, which = "is newer than the newest recorded release", ", the newest recorded"
    elif at < _records.known_version(recorded[0]):
        where, which = "is older than the oldest recorded release", ", the oldest recorded"
    else:
        after = next(v for v in recorded if _records.known_version(v) > at)
        where, which = f"is between the recorded releases {table} and {after}", ""
    # A release newer than the data can be recorded by the admin and added for a run: say how.
    extend = (f" (record it with scripts/engine-tables --only {engine}=={at_text} --out FILE and add it with "
              f"KUBECTL_KVDTYPE_ENGINE_TABLES=FILE)") if at > _records.known_version(recorded[-1]) else ""
    # Two parts, each said with what decided it: the spelling by the hand-kept table at the version
    # itself (it knows releases no recording covers), the argv by the recorded parser that stood in.
    return Basis(at_text, table, None,
                 f"{engine} {at_text} {where}: the spelling judged by this tool's spelling table at {at_text}, "
                 f"the argv read by {engine} {table}'s parser{which}{extend}",
                 at_start is not None, added, replaces)


_basis_cached = functools.lru_cache(maxsize=256)(_basis)


@memoized(maxsize=4096)
def judge(engine: str, version: object, dtype: str) -> _records.Judgement:
    """How ``engine`` at ``version`` takes ``dtype``: the recording wins at recorded versions.

    Where the version's recorded parser lists the flag's choices, they decide; elsewhere the
    hand-kept spelling windows (``_engines.records.judge_spelling``) do, and the Judgement's ``note`` names
    the recorded parser that stood in for the version. Memoized.
    """
    found = basis(engine, version)
    judged = _judge_by(found, engine, version, dtype)
    if found.added:  # an added table decided: the verdict says so wherever it is said
        return replace(judged, reason=f"{judged.reason} ({found.added_clause})")
    return judged


def _judge_by(found: Basis, engine: str, version: object, dtype: str) -> _records.Judgement:
    by_table = _records.judge_spelling(engine, version, dtype)
    failure = _records.AT_START_FAILURE if found.at_start else _records.AT_PARSING_FAILURE
    if by_table.verdict == _records.REJECTED:
        by_table = replace(by_table, failure=failure)
    if found.choices is None:
        reason = by_table.reason
        if not found.note and by_table.verdict != _records.UNKNOWN:
            reason += f" (this tool's spelling table: the recorded parser of {engine} {found.table} checks no choices)"
        return replace(by_table, reason=reason, note=found.note)
    verdict = _records.ACCEPTED if dtype in found.choices else _records.REJECTED
    if verdict == by_table.verdict:
        return replace(by_table, note=found.note)
    label = f"{engine} {by_table.version}" + (" (reference version)" if by_table.version_is_reference else "")
    if verdict == _records.ACCEPTED:
        recorded = "its recorded start check" if found.at_start else "its recorded parser"
        return replace(by_table, verdict=_records.ACCEPTED, reason=f"{label} accepts {dtype} ({recorded} lists it)",
                       failure="", note=found.note)
    refused = "its recorded start check does not list it" if found.at_start \
        else "its recorded parser's choices do not list it"
    return replace(by_table, verdict=_records.REJECTED, note=found.note,
                   reason=f"{label} does not accept {dtype} ({refused})", failure=failure)


# --- Reading the flag out of an argv -------------------------------------------------------

EXACT = "exact"
UNDERSCORE = "underscore"
ABBREVIATION = "abbreviation"
#: One argv entry holding the flag, a space and a value (``"--kv-cache-dtype fp8"``): argparse
#: takes an entry with a space as a positional argument, so no engine reads it as the flag.
SPACED = "spaced"
#: A dotted option (``--kv-cache-dtype.x fp8``): vLLM's own rewriting turns it into the flag with
#: a JSON value (``{"x": "fp8"}``), appended after the other arguments (``_engines.rewrites``).
DOTTED = "dotted"


@record_type(frozen=True)
class FlagOccurrence:
    """One place in an argv where an engine may read ``--kv-cache-dtype``."""

    index: int  # position of the token in the argv that was scanned
    token: str  # the token as written
    value: Optional[str]  # None when the flag ends the argv without a value
    spelling: str  # EXACT | UNDERSCORE | ABBREVIATION | SPACED | DOTTED
    read: bool  # whether this engine reads it as the flag (False: the process fails instead)
    note: str  # why, for a human; "" for the plain exact form
    in_shell: bool = False  # found inside a shell command string such as ``sh -c "vllm ..."``
    field: str = ""  # the container/role field scanned ("command", "args", "extraArgs"), if known
    #: The value as written where the engine reads another (a DOTTED copy's next entry); None otherwise.
    given: Optional[str] = None

    @property
    def where(self) -> str:
        """``args[3]``: the position a human can find in the object."""
        return f"{self.field or 'argv'}[{self.index}]"

    @property
    def shown(self) -> str:
        """``--kv-cache-dtype fp8 at args[3]``: the occurrence as a message quotes it."""
        if self.spelling == DOTTED:
            written = self.token if self.given is None else f"{self.token} {self.given}"
        elif "=" in self.token or self.value is None or self.spelling == SPACED:
            written = self.token
        else:
            written = f"{self.token} {self.value}"
        return f"{written} at {self.where}"

    def to_dict(self) -> dict:
        data = {"index": self.index, "token": self.token, "value": self.value,
                "spelling": self.spelling, "read": self.read}
        if self.field:
            data["field"] = self.field
        if self.note:
            data["note"] = self.note
        if self.in_shell:
            data["inShell"] = True
        if self.given is not None:
            data["given"] = self.given
        return data


@memoized(maxsize=1024)
def classify_option(name: str, engine: Optional[str], version: object) -> Optional[tuple[str, bool, str]]:
    """(spelling, read, note) when an option name could be the flag; else None (memoized).

    Which names are candidates, and whether this engine at this version reads one as the flag,
    both come from the recorded parser tables (``_engines.parsers.option_matches``): a candidate is the flag
    with dashes or underscores, or an abbreviation at least as long as the shortest one some
    recorded version of the engine reads (``--kv-cache-d`` for vLLM 0.18, ``--kv-cac`` for SGLang);
    never a longer option such as ``--kv-cache-dtype-skip-layers``.
    """
    folded = name.replace("_", "-")
    if not (folded.startswith("--") and _records.FLAG.startswith(folded)):
        return None
    from kubectl_kvdtype._engines import parsers as _parsers  # the tables load on first use, never at start-up

    engines = [engine] if engine in _records.ENGINES else list(_records.ENGINES)
    if len(folded) < min(_parsers.shortest_flag_prefix(e) for e in engines):
        return None
    spelling = EXACT if name == _records.FLAG else UNDERSCORE if folded == _records.FLAG else ABBREVIATION
    if engine not in _records.ENGINES:
        read = any(_parsers.option_matches(e, t, name) == (_records.FLAG,)
                   for e in engines for t in _parsers.recorded_versions(e))
        return spelling, read, "" if spelling == EXACT else "a spelling some engine's parser reads as the flag"
    table = _parsers.table_version(engine, _version_or_reference(engine, version))
    matches = _parsers.option_matches(engine, table, name)
    label = f"{engine} {table}"
    if matches == (_records.FLAG,):
        if spelling == UNDERSCORE:
            return spelling, True, f"{engine} reads underscores in flag names as dashes"
        if spelling == ABBREVIATION:
            return spelling, True, f"an abbreviation {label}'s parser expands to {_records.FLAG}"
        return spelling, True, ""
    if len(matches) > 1:
        return spelling, False, (f"an abbreviation {label} rejects as ambiguous (it could match "
                                 f"{', '.join(matches)})")
    if "_" in name:
        return spelling, False, (f"{engine} does not read underscores in flag names: it fails with "
                                 "'unrecognized arguments' at startup")
    return spelling, False, f"{label} has no such option: it fails with 'unrecognized arguments' at startup"


def _version_or_reference(engine: str, version: object) -> str:
    """The version text the tables are chosen by: the consumer's, else the engine's reference."""
    return str(version) if _records.parse_version(version) is not None else _records.record(engine).reference_version


def find_dtype_flags(argv: object, engine: Optional[str] = None, version: object = None) -> list[FlagOccurrence]:
    """Every occurrence of the flag in ``argv`` in any spelling ``engine`` could read as it.

    This locates copies (which entry, which value as written); what the engine makes of the
    whole argv is :func:`read_flag`'s. ``engine`` None means "unknown": every spelling some engine
    reads is reported. Scanning stops at ``--`` like argparse. A token holding a whole shell
    command is split and scanned too.
    """
    tokens = [t for t in argv if isinstance(t, str)] if isinstance(argv, list) else []
    dotted = _dotted(tokens, engine, version)
    taken = {option.given for option in dotted.values()}  # a dotted option's value: the engine takes it out
    found: list[FlagOccurrence] = []
    for index, token in enumerate(tokens):
        if token == "--":
            break
        # Every spelling of the flag, and every shell line holding it, says "kv".
        if "kv" not in token or index in taken:
            continue
        if index in dotted:
            found.extend(_dotted_occurrence(index, token, tokens, dotted[index], engine, version))
        elif token.startswith("-") and any(c.isspace() for c in token.partition("=")[0].strip()):
            # argparse splits an entry at its first "=" before it looks for a space: with "=" ahead
            # of the space (``--kv-cache-dtype=fp8 x``) it is the flag, its value ``fp8 x``.
            found.extend(_spaced(index, token, engine, version))
        elif token.startswith("-"):
            found.extend(_occurrence(index, token, tokens[index + 1:index + 2], engine, version))
        elif _looks_like_shell(token):
            found.extend(replace(inner, index=index, in_shell=True)
                         for inner in find_dtype_flags(_split_shell(token), engine, version))
    return found


def _occurrence(index: int, token: str, following: list[str], engine: Optional[str],
                version: object) -> list[FlagOccurrence]:
    name, has_inline, inline = token.partition("=")
    kind = classify_option(name, engine, version)
    if kind is None:
        return []
    if has_inline:
        value: Optional[str] = inline
    else:
        value = following[0] if following and _is_value(following[0]) else None
    spelling, read, note = kind
    return [FlagOccurrence(index, token, value, spelling, read, note)]


def _dotted(tokens: list[str], engine: Optional[str], version: object) -> dict:
    """The dotted options in ``tokens`` (``_engines.rewrites.dotted_options``), where the engine's
    recorded table names a rewriting step that reads them (an unknown engine: where some engine's does)."""
    if not any(t.startswith("-") and "." in t for t in tokens):  # one without "kv" may take the flag as its value
        return {}
    from kubectl_kvdtype._engines import parsers as _parsers  # the tables load on first use, never at start-up
    from kubectl_kvdtype._engines import rewrites as _rewrites

    for name in [engine] if engine in _records.ENGINES else list(_records.ENGINES):
        table = _parsers.table_version(name, _version_or_reference(name, version))
        if _parsers.steps(name, table) & _rewrites.DOTTED_STEPS:
            return _rewrites.dotted_options(tokens, table)
    return {}


def _dotted_occurrence(index: int, token: str, tokens: list[str], dotted: object, engine: Optional[str],
                       version: object) -> list[FlagOccurrence]:
    """A dotted option whose name is a spelling of the flag: the engine reads the flag, with the
    option's merged JSON as its value, after the other arguments."""
    from kubectl_kvdtype._engines import rewrites as _rewrites

    assert isinstance(dotted, _rewrites.DottedOption)
    kind = classify_option(token.split(".", 1)[0], engine, version)
    if kind is None:
        return []
    _, read, note = kind
    given = None if dotted.given is None else tokens[dotted.given]
    how = (f"{engine or 'vLLM'} turns a dotted option into JSON: it reads {dotted.option} {dotted.value} after "
           "the other arguments") if dotted.value is not None else f"{engine or 'vLLM'} reads a dotted option"
    if dotted.after_separator:
        read, how = False, f"{how}, after --, where it is no option (the engine fails with 'unrecognized arguments')"
    return [FlagOccurrence(index, token, dotted.value, DOTTED, read, "; ".join(p for p in (how, note) if p),
                           given=given)]


def _is_value(token: str) -> bool:
    """Whether argparse takes ``token`` as the flag's value rather than as the next option.

    argparse treats ``-`` alone, negative numbers and entries holding a space as arguments;
    any other entry starting with ``-`` is an option, and the flag is then left without a value.
    """
    if not token.startswith("-") or token == "-" or " " in token:
        return True
    return re.fullmatch(r"-\d+(\.\d+)?|-\.\d+", token) is not None


def _spaced(index: int, token: str, engine: Optional[str], version: object) -> list[FlagOccurrence]:
    """``"--kv-cache-dtype fp8"`` as ONE entry: argparse reads a positional, never the flag."""
    head, _, rest = token.strip().partition(" ")
    name, has_inline, inline = head.partition("=")
    if classify_option(name, engine, version) is None:
        return []
    words = rest.strip().split()
    value = inline if has_inline else (words[0] if words else None)
    return [FlagOccurrence(index, token, value, SPACED, False,
                           "one argv entry holding a space: argparse takes it as a positional argument, "
                           "not as the flag, so the engine does not read it (and fails with "
                           "'unrecognized arguments')")]


def _looks_like_shell(token: str) -> bool:
    return ("kv-cache" in token or "kv_cache" in token) and any(c.isspace() for c in token)


def _split_shell(token: str) -> list[str]:
    try:
        return shlex.split(token)
    except ValueError:
        return token.split()


def find_in_fields(fields: Sequence[tuple[str, object]], engine: Optional[str] = None,
                   version: object = None, env: object = None) -> list[FlagOccurrence]:
    """Occurrences in the argv the fields make together (a container's ``command`` + ``args``).

    The engine sees one argv, so the fields are scanned as one (a flag ending ``command`` takes
    its value from ``args``; ``--`` in ``command`` ends option parsing in ``args`` too); each
    occurrence is then located in its own field, ``index`` counted within that field. Values are
    the kubelet's expansion of ``$(VAR)`` from ``env`` where it is known; tokens stay as written.
    """
    argv, spans = _joined(fields)
    expanded = _expanded(argv, env)
    located = []
    for occurrence in find_dtype_flags(expanded, engine, version):
        name, start = next((n, s) for n, s in reversed(spans) if s <= occurrence.index)
        located.append(replace(occurrence, index=occurrence.index - start, field=name,
                               token=argv[occurrence.index]))
    return located


def _joined(fields: Sequence[tuple[str, object]]) -> tuple[list[str], list[tuple[str, int]]]:
    argv: list[str] = []
    spans: list[tuple[str, int]] = []
    for name, values in fields:
        spans.append((name, len(argv)))
        if isinstance(values, list):
            argv += [t for t in values if isinstance(t, str)]
    return argv, spans


def _expanded(argv: list[str], env: object) -> list[str]:
    if not env or not any("$(" in t for t in argv):
        return argv
    from kubectl_kvdtype._engines import argv as _argv

    return _argv.expand_kubernetes(argv, env)[0]


# --- What an engine makes of an argv ------------------------------------------------------

#: ``FlagReading.state``: the engine runs ``value``; runs its default (no flag); exits with
#: ``error``; or this tool cannot say (an engine it does not know, a value its tables do not list,
#: a value set from outside the object).
VALUE, ABSENT, FAILED, UNSURE = "value", "absent", "failed", "unknown"
#: ``FlagReading.stage`` of a failure: argparse refuses the argv, or the engine refuses the value
#: after parsing (vLLM 0.33+ checks no choices in its parser).
AT_PARSING, AT_START = "argument parsing", "engine start"


@record_type(frozen=True)
class FlagReading:
    """What an engine at a version makes of a container's argv, as far as ``--kv-cache-dtype`` goes."""

    state: str  # VALUE | ABSENT | FAILED | UNSURE
    #: The dtype the engine runs (VALUE); with UNSURE, the one it would run if it accepts it.
    value: Optional[str] = None
    #: The engine's own error text when FAILED ("error: argument --kv-cache-dtype: invalid choice: ...").
    error: str = ""
    #: Every occurrence of the flag, in argv order, for locating copies.
    occurrences: tuple[FlagOccurrence, ...] = ()
    stage: str = ""  # AT_PARSING | AT_START when FAILED
    #: The occurrence the failure is about, or the one whose value wins.
    culprit: Optional[FlagOccurrence] = None
    #: Why the state is UNSURE, for a human.
    reason: str = ""
    #: Which recorded parser stood in for a version that is not recorded (``Basis.note``); "" at one.
    note: str = ""

    @property
    def runs(self) -> bool:
        """Whether the engine gets past reading the flag (it may still be UNSURE)."""
        return self.state in (VALUE, ABSENT, UNSURE)


def read_flag(fields: Sequence[tuple[str, object]], engine: Optional[str], version: object,
              env: object = None) -> FlagReading:
    """What ``engine`` (canonical name, None when unknown) at ``version`` makes of the argv ``fields``.

    The fields are one container argv (``command`` then ``args``, with the container's ``env`` for
    the kubelet's ``$(VAR)`` expansion). The engine's own parser, rebuilt from its recorded option
    table (``_engines.parsers``, through ``_engines.argv``), decides: the first refused value,
    missing value or ambiguous abbreviation ends the process even when a later copy is valid; only
    when every copy passes does the last one win. vLLM 0.33+ checks no choices in the parser: the
    value that wins is refused at engine start instead. A value the spelling tables do not list, or
    one that depends on something outside the object, makes the reading UNSURE, never FAILED.
    """
    relevant_env = env if env and any("$" in t for t in _joined(fields)[0]) else None  # only a variable can use it
    try:
        key = tuple((name, tuple(values) if isinstance(values, list) else None) for name, values in fields)
        # The env as a key: most argvs use no variable, and json.dumps is a tenth of a large run's judging.
        env_key = "null" if relevant_env is None else json.dumps(relevant_env, sort_keys=True)
        return _read_flag_cached(key, engine, version, env_key)
    except TypeError:  # an unhashable version or argv entry from a hand-written manifest
        return _read_flag(fields, engine, version, relevant_env)


@functools.lru_cache(maxsize=4096)
def _read_flag_cached(key: tuple, engine: Optional[str], version: object, env: str) -> FlagReading:
    """Memoized by argv, engine, version and the env it refers to: replicas repeat a few argvs."""
    return _read_flag([(name, list(values) if values is not None else None) for name, values in key],
                      engine, version, json.loads(env))


def _read_flag(fields: Sequence[tuple[str, object]], engine: Optional[str], version: object,
               env: object) -> FlagReading:
    found = tuple(find_in_fields(fields, engine, version, env))
    read = [o for o in found if o.read]
    if engine not in _records.ENGINES:
        return FlagReading(UNSURE if found else ABSENT, read[-1].value if read else None, occurrences=found,
                           culprit=read[-1] if read else None,
                           reason=f"the engine is none of {', '.join(_records.ENGINES)}, "
                                  "so how it reads the argv is not known")
    judged_by = basis(engine, version)
    note = "; ".join(part for part in (judged_by.note, judged_by.added_clause) if part)
    return replace(_parse(fields, engine, version, env, found), note=note)


def _parse(fields: Sequence[tuple[str, object]], engine: str, version: object, env: object,
           found: tuple[FlagOccurrence, ...]) -> FlagReading:
    from kubectl_kvdtype._engines import argv as _argv
    from kubectl_kvdtype._engines import parsers as _parsers

    read = [o for o in found if o.read]
    at = _version_or_reference(engine, version)
    argv, _ = _joined(fields)
    reading = _argv.read_container(engine, at, argv, [], env)
    if reading.state == _parsers.UNKNOWN:
        return FlagReading(UNSURE, None, occurrences=found, culprit=read[-1] if read else None, reason=reading.error)
    if reading.state == _parsers.FAILED and reading.at_start:  # the engine's own start check, recorded
        return FlagReading(FAILED, None, reading.error, found, AT_START, _winner(read, reading.value or ""),
                           reason=judge(engine, version, reading.value or "").reason)
    if reading.state == _parsers.FAILED:
        error = f"error: {reading.error}" if reading.exit_code == 2 else reading.error
        return FlagReading(FAILED, None, error, found, AT_PARSING, _culprit(reading.error, found))
    if reading.state == _parsers.ABSENT:
        return FlagReading(ABSENT, occurrences=found)
    value = reading.value or ""
    winner = _winner(read, value)
    judged = judge(engine, version, value)
    if judged.verdict == _records.REJECTED and basis(engine, version).at_start:  # judged by the spelling table
        return FlagReading(FAILED, None, f"{judged.reason}: the engine exits at start-up", found, AT_START, winner,
                           reason=judged.reason)
    if judged.verdict == _records.UNKNOWN:
        return FlagReading(UNSURE, value, occurrences=found, culprit=winner, reason=judged.reason)
    return FlagReading(VALUE, value, occurrences=found, culprit=winner)


def _winner(read: Sequence[FlagOccurrence], value: str) -> Optional[FlagOccurrence]:
    """The copy whose value the engine runs with (the last one holding it)."""
    return next((o for o in reversed(read) if o.value == value), read[-1] if read else None)


def read_role(extra_args: Sequence[str], engine: Optional[str], version: object,
              operator_dtype: Optional[str] = None, model: str = "MODEL") -> FlagReading:
    """What a managed role's replica makes of its argv: the operator's base command, its copy of
    the flag (``operator_dtype``, when it renders one), then the role's ``extraArgs``.

    Occurrences are located in the fields ``operator`` and ``extraArgs``.
    """
    return _read_role(tuple(extra_args), engine, version, operator_dtype, model)


#: A big cluster's roles repeat a few ``extraArgs``: each reading is made once, keyed by what
#: decides it, before the argv and ``read_flag``'s own key are even built.
@memoized(maxsize=4096)
def _read_role(extra_args: Sequence[str], engine: Optional[str], version: object, operator_dtype: Optional[str],
               model: str) -> FlagReading:
    base = _records.record(engine).command(model) if engine in _records.ENGINES else []
    fields: list[tuple[str, object]] = [("base", base)]
    if operator_dtype is not None:
        fields.append(("operator", [_records.FLAG, operator_dtype]))
    fields.append(("extraArgs", list(extra_args)))
    return read_flag(fields, engine, version)


def renders(engine: str, version: object, dtype: str) -> FlagReading:
    """What a consumer of ``engine`` at ``version`` does with the argv the upgrade renders for it:
    the operator's base command and the Binding's ``dtype``, without a role's own ``extraArgs``
    (an unrelated bad option of one role never makes a Binding rejected). ``check`` and
    :func:`remedy` ask this; ``preflight``, ``verify`` and ``find-flags`` ask :func:`read_flag`
    about the whole argv, which this is one case of. Where the recorded choices alone give the
    answer (:func:`_rendered_by_choices`), the engine's parser is not built for it."""
    if isinstance(version, (str, int, float)) or version is None:
        by_choices = _rendered_by_choices(engine, version, dtype)
        if by_choices is not None:
            return by_choices
    return read_role((), engine, version, operator_dtype=dtype)


@functools.lru_cache(maxsize=256)
def _rendered_by_choices(engine: str, version: object, dtype: str) -> Optional[FlagReading]:
    """:func:`renders`' answer without a parse, when the recorded choices give it: at a recorded
    version whose parser lists the flag's choices (no start check), a listed ``dtype`` after the
    operator's own base command is what the engine runs, so the reading is VALUE; memoized.

    None otherwise: a refused value fails in argparse's own words, which only the parser says; a
    version between recordings, or one checked at start, is judged as :func:`read_flag` judges it.
    ``tests/test_verdicts.py`` holds this equal to the parse at every recorded table and choice."""
    if engine not in _records.ENGINES:
        return None
    found = basis(engine, version)
    if found.note or found.at_start or found.choices is None or dtype not in found.choices:
        return None
    from kubectl_kvdtype._engines import parsers as _parsers  # the tables load on first use, never at start-up

    if _parsers.start_check(engine, found.table) is not None:
        return None
    fields: list[tuple[str, object]] = [("base", _records.record(engine).command("MODEL")),
                                        ("operator", [_records.FLAG, dtype]),
                                        ("extraArgs", [])]
    occurrences = tuple(find_in_fields(fields, engine, version))
    winner = _winner([o for o in occurrences if o.read], dtype)
    return FlagReading(VALUE, dtype, occurrences=occurrences, culprit=winner, note=found.added_clause)


def _runs(engine: str, version: object, dtype: str) -> bool:
    return renders(engine, version, dtype).state == VALUE


def suggest(dtype: str, consumers: Iterable[tuple[str, object]]) -> Optional[str]:
    """A spelling meaning the same as ``dtype`` that every (engine, version) consumer runs, or None."""
    return _records.suggest_by(dtype, consumers, _runs)


def remedy(dtype: str, consumers: Iterable[tuple[str, object]]) -> _records.Remedy:
    """The fix for ``dtype`` that some (engine, version) consumers reject, judged by :func:`renders`
    (see ``_engines.records.remedy_by`` for the order in which fixes are sought). Memoized by the
    dtype and the consumers' (engine, version) pairs: every rejected Binding asks, and a cluster
    has few distinct such questions."""
    return _remedy_cached(dtype, tuple(consumers))


@memoized(maxsize=1024)
def _remedy_cached(dtype: str, pairs: tuple[tuple[str, object], ...]) -> _records.Remedy:
    return _records.remedy_by(dtype, pairs, _runs)


def _culprit(error: str, found: tuple[FlagOccurrence, ...]) -> Optional[FlagOccurrence]:
    """The copy argparse's error is about: the refused value, the one missing its value, the
    ambiguous or unrecognized spelling; None when the error is about another option."""
    read = [o for o in found if o.read]
    choice = re.search(r"invalid choice: '((?:[^'\\]|\\.)*)'", error)
    if error.startswith(f"argument {_records.FLAG}:") and choice:
        return next((o for o in read if o.value == choice.group(1)), read[0] if read else None)
    if error.startswith(f"argument {_records.FLAG}:"):
        return next((o for o in read if o.value is None), read[0] if read else None)
    ambiguous = re.match(r"ambiguous option: (\S+)", error)
    if ambiguous:
        return next((o for o in found if _option_name(o) == ambiguous.group(1).partition("=")[0]), None)
    if error.startswith("unrecognized arguments:"):
        return next((o for o in found if not o.read), None)
    return next((o for o in found if o.token.partition("=")[0] in error), None)


def _option_name(occurrence: FlagOccurrence) -> str:
    """The option an occurrence gives argparse, as its errors name it (a dotted one's key)."""
    name = occurrence.token.partition("=")[0]
    return name.split(".", 1)[0] if occurrence.spelling == DOTTED else name
