"""Everything the plugin knows about the two engines: names, versions, spellings, argv.

This is the one place that encodes docs/engines.md ("Which spellings each engine accepts", "How
each engine reads the flag"): which ``--kv-cache-dtype`` values each engine accepts at which
version, which spellings mean the same, and how each engine's argparse reads the flag out of an
argv. The rest of the package asks questions; only this module
answers them.
"""

from __future__ import annotations

import functools
import re
import shlex
from dataclasses import dataclass, replace
from typing import Iterable, Optional, Sequence

VLLM = "vLLM"
SGLANG = "SGLang"
ENGINES = (VLLM, SGLANG)

#: The operator's reference versions: what a consumer of unknown version is judged against.
REFERENCE_VERSIONS = {VLLM: "0.29.0", SGLANG: "0.5.18"}

FLAG = "--kv-cache-dtype"
#: The shortest abbreviation treated as meaning the flag; shorter prefixes (``--kv-c``) are
#: shared by many other engine options, so argparse would call them ambiguous anyway.
_MIN_ABBREVIATION = len("--kv-cache-d")
#: vLLM 0.19 added ``--kv-cache-dtype-skip-layers``, which makes every abbreviation ambiguous.
_VLLM_ABBREVIATIONS_AMBIGUOUS_FROM = "0.19.0"
#: vLLM 0.33 stopped enforcing choices in the parser; a bad value fails at engine start instead.
_VLLM_LATE_VALIDATION_FROM = "0.33.0"

Version = tuple  # (major, minor, patch, pre/post rank, number): comparable, built by parse_version

_VERSION_RE = re.compile(
    r"^\s*[vV]?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:[.\-_]?(post|rc|a|b|dev)\.?(\d*))?"
)
_SUFFIX_RANK = {"dev": -4, "a": -3, "b": -2, "rc": -1, None: 0, "post": 1}


def parse_version(text: object) -> Optional[Version]:
    """Read free-form engine version text ("0.29.0", "v0.5.18.post1"); None when unreadable."""
    if not isinstance(text, (str, int, float)):
        return None
    match = _VERSION_RE.match(str(text))
    if not match:
        return None
    major, minor, patch, suffix, number = match.groups()
    return (int(major), int(minor or 0), int(patch or 0), _SUFFIX_RANK[suffix], int(number or 0))


def _v(text: str) -> Version:
    parsed = parse_version(text)
    assert parsed is not None, text
    return parsed


@dataclass(frozen=True)
class Window:
    """A half-open range of versions [since, until) in which a spelling is accepted."""

    since: Optional[Version] = None
    until: Optional[Version] = None

    def contains(self, version: Version) -> bool:
        return (self.since is None or version >= self.since) and (
            self.until is None or version < self.until
        )


def _since(text: str) -> tuple[Window, ...]:
    return (Window(since=_v(text)),)


_ALWAYS = (Window(),)

#: Spellings each engine accepts, and from (until) which version: docs/engines.md,
#: "Which spellings each engine accepts", which says where each row comes from.
_ACCEPTED: dict[str, dict[str, tuple[Window, ...]]] = {
    VLLM: {
        "auto": _ALWAYS,
        # fp8_e5m2 appeared in 0.3.0, went missing in 0.4.1-0.4.2 and came back in 0.4.3.
        "fp8_e5m2": (Window(_v("0.3.0"), _v("0.4.1")), Window(since=_v("0.4.3"))),
        "fp8": _since("0.4.1"),
        "fp8_e4m3": _since("0.4.3"),
        "fp8_inc": _since("0.10.0"),
        "bfloat16": _since("0.11.0"),
        "fp8_ds_mla": _since("0.11.1"),
        "float16": _since("0.18.0"),
        "nvfp4": _since("0.20.0"),
        "nvfp4_4over6": _since("0.28.0"),
    },
    SGLANG: {
        "auto": _since("0.2.14"),
        "fp8_e5m2": _since("0.2.14"),
        "fp8_e4m3": _since("0.4.2"),
        "bf16": _since("0.5.4"),
        "bfloat16": _since("0.5.4"),
        "fp4_e2m1": (Window(_v("0.5.4.post3"), _v("0.5.21")),),
        "mxfp8": _since("0.5.16"),
        "nvfp4": _since("0.5.16"),
        "fp4_mx_block16": _since("0.5.16"),
    },
}

#: Spellings known to be refused by an engine at every version (the table's "no" cells).
_NEVER = {"FP8", "BF16", "fp16", "half"}
_REJECTED: dict[str, frozenset[str]] = {
    VLLM: frozenset({"bf16", "mxfp8", "fp4_mx_block16"} | _NEVER),
    SGLANG: frozenset({"fp8", "float16", "fp8_inc", "fp8_ds_mla"} | _NEVER),
}

#: Spellings that mean the same cache format, preferred spelling first. vLLM's ``fp8`` means
#: ``fp8_e4m3``; ``float16`` has no SGLang spelling, so its class gives SGLang nothing.
_EQUIVALENT_CLASSES: tuple[tuple[str, ...], ...] = (
    ("bfloat16", "bf16"),
    ("fp8_e4m3", "fp8"),
    ("float16", "fp16", "half"),
)
_CLASS_OF = {spelling: cls for cls in _EQUIVALENT_CLASSES for spelling in cls}

ACCEPTED = "accepted"
REJECTED = "rejected"
UNKNOWN = "unknown"


def canonical_engine(name: object) -> Optional[str]:
    """``vLLM``/``SGLang`` for any capitalisation (older objects say ``vllm``); else None."""
    if not isinstance(name, str):
        return None
    return {"vllm": VLLM, "sglang": SGLANG}.get(name.strip().lower())


@dataclass(frozen=True)
class Judgement:
    """How one engine at one version takes one dtype spelling."""

    engine: str
    version: str  # the version judged against: the consumer's own, else the reference
    version_is_reference: bool
    dtype: str
    verdict: str  # ACCEPTED | REJECTED | UNKNOWN
    reason: str  # one clause a human can read ("vLLM 0.29.0 does not accept bf16")
    failure: str = ""  # how a rejected replica fails ("exits at argument parsing")


def judge(engine: str, version: object, dtype: str) -> Judgement:
    """Judge ``dtype`` for ``engine`` (canonical name) at ``version`` (free text or None).

    Memoized: a cluster has few distinct (engine, version, dtype) triples and many consumers.
    """
    try:
        return _judge_cached(engine, version, dtype)
    except TypeError:  # an unhashable version (a hand-written manifest's list or mapping)
        return _judge(engine, version, dtype)


def _judge(engine: str, version: object, dtype: str) -> Judgement:
    parsed = parse_version(version)
    is_reference = parsed is None
    shown = REFERENCE_VERSIONS[engine] if is_reference else str(version).strip()
    at = parsed if parsed is not None else _v(REFERENCE_VERSIONS[engine])
    label = f"{engine} {shown}" + (" (reference version)" if is_reference else "")
    windows = _ACCEPTED[engine].get(dtype)
    if windows is not None:
        if any(window.contains(at) for window in windows):
            return Judgement(engine, shown, is_reference, dtype, ACCEPTED, f"{label} accepts {dtype}")
        return Judgement(engine, shown, is_reference, dtype, REJECTED,
                         f"{label} does not accept {dtype} ({_availability(windows)})", _failure_mode(engine, at))
    if dtype in _REJECTED[engine]:
        return Judgement(engine, shown, is_reference, dtype, REJECTED,
                         f"{label} does not accept {dtype}", _failure_mode(engine, at))
    return Judgement(
        engine, shown, is_reference, dtype, UNKNOWN,
        f"{dtype} is not in this tool's table for {engine}, so it is neither confirmed nor refused",
    )


_judge_cached = functools.lru_cache(maxsize=4096)(_judge)


def _availability(windows: Sequence[Window]) -> str:
    parts = []
    for window in windows:
        since = _show(window.since) if window.since else None
        until = _show(window.until) if window.until else None
        if since and until:
            parts.append(f"accepted from {since} until before {until}")
        elif since:
            parts.append(f"accepted from {since}")
        elif until:
            parts.append(f"accepted until before {until}")
    return "; ".join(parts)


def _show(version: Version) -> str:
    major, minor, patch, rank, number = version
    suffix = {1: f".post{number}", 0: ""}.get(rank, f"rc{number}")
    return f"{major}.{minor}.{patch}{suffix}"


def _failure_mode(engine: str, at: Version) -> str:
    if engine == VLLM and at >= _v(_VLLM_LATE_VALIDATION_FROM):
        return "fails at engine start"
    return "exits at argument parsing"


def equivalents(dtype: str) -> tuple[str, ...]:
    """Spellings that mean the same as ``dtype``, preferred first (``dtype`` alone if none)."""
    return _CLASS_OF.get(dtype) or _CLASS_OF.get(dtype.lower()) or (dtype,)


def suggest(dtype: str, consumers: Iterable[tuple[str, object]]) -> Optional[str]:
    """A spelling meaning the same as ``dtype`` that every (engine, version) accepts, or None."""
    pairs = list(consumers)
    for candidate in equivalents(dtype):
        if candidate == "auto":
            continue
        if all(judge(engine, version, candidate).verdict == ACCEPTED for engine, version in pairs):
            return candidate
    return None


#: Cache formats by width in bits: a different dtype is sought nearest in width first.
_WIDTH = {"bfloat16": 16, "bf16": 16, "float16": 16, "fp16": 16, "half": 16, "fp8_e4m3": 8, "fp8_e5m2": 8,
          "fp8": 8, "fp8_inc": 8, "fp8_ds_mla": 8, "mxfp8": 8, "nvfp4": 4, "fp4_e2m1": 4, "fp4_mx_block16": 4}
#: Different dtypes a fix may propose, in the order preferred at equal width.
_ALTERNATIVES = ("bfloat16", "fp8_e4m3", "fp8_e5m2", "nvfp4")

REBIND, UPGRADE, REBIND_DIFFERENT, SPLIT, NO_FIX = "rebind", "upgrade", "rebind-different", "split", "none"


@dataclass(frozen=True)
class Remedy:
    """What makes a rejected dtype work for every consumer, first that applies (``kind``)."""

    kind: str  # REBIND | UPGRADE | REBIND_DIFFERENT | SPLIT | NO_FIX
    text: str  # the fix as a table cell says it ("upgrade SGLang to >= 0.5.16")
    spelling: Optional[str] = None  # the dtype to rebind with (REBIND, REBIND_DIFFERENT)


def remedy(dtype: str, consumers: Iterable[tuple[str, object]]) -> Remedy:
    """The fix for ``dtype`` that some (engine, version) consumers reject.

    In order: a spelling meaning the same that every consumer accepts; the engine versions from
    which the spelling is accepted; a different dtype every consumer accepts (it changes the
    KV-cache precision, and the fix says so); and only when consumers of different engines have no
    common spelling, splitting them by engine.
    """
    pairs = list(dict.fromkeys((e, v if isinstance(v, (str, type(None))) else str(v)) for e, v in consumers))
    same = suggest(dtype, pairs)
    if same:
        return Remedy(REBIND, f"rebind with {same}", same)
    upgrades = _upgrades(dtype, pairs)
    if upgrades:
        return Remedy(UPGRADE, "upgrade " + " and ".join(f"{e} to >= {v}" for e, v in upgrades.items()))
    other = _different_dtype(dtype, pairs)
    if other:
        return Remedy(REBIND_DIFFERENT, f"rebind with {other} (a different dtype)", other)
    if len({engine for engine, _ in pairs}) > 1:
        return Remedy(SPLIT, "split consumers by engine")
    return Remedy(NO_FIX, "upgrade the engine (no dtype is accepted by this version)")


def _upgrades(dtype: str, pairs: list[tuple[str, object]]) -> dict[str, str]:
    """{engine: version} to upgrade to so every rejecting consumer accepts ``dtype``; {} if none will."""
    needed: dict[str, Version] = {}
    for engine, version in pairs:
        if judge(engine, version, dtype).verdict == ACCEPTED:
            continue
        windows = _ACCEPTED[engine].get(dtype, ())
        at = parse_version(version) or _v(REFERENCE_VERSIONS[engine])
        # The first version after this one from which the spelling stays accepted.
        since = [w.since for w in windows if w.until is None and w.since is not None and w.since > at]
        if not since:
            return {}
        needed[engine] = max(needed.get(engine, since[0]), since[0])
    return {engine: _show(version) for engine, version in needed.items()}


def _different_dtype(dtype: str, pairs: list[tuple[str, object]]) -> Optional[str]:
    width = _WIDTH.get(dtype, 16)
    own = set(equivalents(dtype))
    candidates = sorted((c for c in _ALTERNATIVES if c not in own),
                        key=lambda c: (abs(_WIDTH[c] - width), -_WIDTH[c], _ALTERNATIVES.index(c)))
    return next((c for c in candidates
                 if all(judge(engine, version, c).verdict == ACCEPTED for engine, version in pairs)), None)


# --- Reading the flag out of an argv -------------------------------------------------------

EXACT = "exact"
UNDERSCORE = "underscore"
ABBREVIATION = "abbreviation"
#: One argv entry holding the flag, a space and a value (``"--kv-cache-dtype fp8"``): argparse
#: takes an entry with a space as a positional argument, so no engine reads it as the flag.
SPACED = "spaced"


@dataclass(frozen=True)
class FlagOccurrence:
    """One place in an argv where an engine may read ``--kv-cache-dtype``."""

    index: int  # position of the token in the argv that was scanned
    token: str  # the token as written
    value: Optional[str]  # None when the flag ends the argv without a value
    spelling: str  # EXACT | UNDERSCORE | ABBREVIATION
    read: bool  # whether this engine reads it as the flag (False: the process fails instead)
    note: str  # why, for a human; "" for the plain exact form
    in_shell: bool = False  # found inside a shell command string such as ``sh -c "vllm ..."``
    field: str = ""  # the container/role field scanned ("command", "args", "extraArgs"), if known

    @property
    def where(self) -> str:
        """``args[3]``: the position a human can find in the object."""
        return f"{self.field or 'argv'}[{self.index}]"

    @property
    def shown(self) -> str:
        """``--kv-cache-dtype fp8 at args[3]``: the occurrence as a message quotes it."""
        written = self.token if "=" in self.token or self.value is None or self.spelling == SPACED \
            else f"{self.token} {self.value}"
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
        return data


def _classify(name: str, engine: Optional[str], version: object) -> Optional[tuple[str, bool, str]]:
    """(spelling, read, note) when an option name means the flag to ``engine``; else None."""
    dashed = name.replace("_", "-")
    if name == FLAG:
        return EXACT, True, ""
    if dashed == FLAG:  # some underscores: vLLM folds them to dashes, SGLang does not
        if engine == SGLANG:
            return UNDERSCORE, False, (
                "SGLang does not read the underscore spelling: it fails with "
                "'unrecognized arguments' at startup"
            )
        return UNDERSCORE, True, "vLLM reads underscores in flag names as dashes"
    if len(dashed) >= _MIN_ABBREVIATION and FLAG.startswith(dashed) and dashed.startswith("--"):
        return _abbreviation(name, dashed, engine, version)
    return None


def _abbreviation(name: str, dashed: str, engine: Optional[str], version: object) -> tuple[str, bool, str]:
    if engine == SGLANG and name != dashed:
        return ABBREVIATION, False, "SGLang does not read underscores in flag names"
    if engine == VLLM:
        parsed = parse_version(version) or _v(REFERENCE_VERSIONS[VLLM])
        if parsed >= _v(_VLLM_ABBREVIATIONS_AMBIGUOUS_FROM):
            return ABBREVIATION, False, (
                f"an abbreviation of {FLAG}: vLLM 0.19+ rejects it as ambiguous "
                "(--kv-cache-dtype-skip-layers shares the prefix)"
            )
        return ABBREVIATION, True, f"an abbreviation argparse expands to {FLAG} (vLLM before 0.19)"
    return ABBREVIATION, True, (
        f"an abbreviation argparse may expand to {FLAG} (argparse prefix rules: refused as ambiguous "
        "when another option of this engine shares the prefix)"
    )


def find_dtype_flags(argv: object, engine: Optional[str] = None, version: object = None) -> list[FlagOccurrence]:
    """Every occurrence of the flag in ``argv`` in any spelling ``engine`` could read as it.

    ``engine`` None means "unknown": every spelling either engine reads is reported. Longer flags
    that merely start with the name (``--kv-cache-dtype-skip-layers``) never match. Scanning stops
    at ``--`` like argparse. A token holding a whole shell command is split and scanned too.
    """
    tokens = [t for t in argv if isinstance(t, str)] if isinstance(argv, list) else []
    found: list[FlagOccurrence] = []
    for index, token in enumerate(tokens):
        if token == "--":
            break
        if "kv" not in token:  # every spelling of the flag, and every shell line holding it, says "kv"
            continue
        if token.startswith("-") and any(c.isspace() for c in token.strip()):
            found.extend(_spaced(index, token, engine, version))
        elif token.startswith("-"):
            found.extend(_occurrence(index, token, tokens[index + 1:index + 2], engine, version))
        elif _looks_like_shell(token):
            found.extend(replace(inner, index=index, in_shell=True)
                         for inner in find_dtype_flags(_split_shell(token), engine, version))
    return found


def _occurrence(index: int, token: str, following: list[str], engine: Optional[str], version: object) -> list[FlagOccurrence]:
    name, has_inline, inline = token.partition("=")
    kind = _classify(name, engine, version)
    if kind is None:
        return []
    if has_inline:
        value: Optional[str] = inline
    else:
        value = following[0] if following and _is_value(following[0]) else None
    spelling, read, note = kind
    return [FlagOccurrence(index, token, value, spelling, read, note)]


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
    kind = _classify(name, engine, version)
    if kind is None:
        return []
    value = inline if has_inline else (rest.strip().split() or [None])[0]
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
                   version: object = None) -> list[FlagOccurrence]:
    """Occurrences in the argv the fields make together (a container's ``command`` + ``args``).

    The engine sees one argv, so the fields are scanned as one (a flag ending ``command`` takes
    its value from ``args``; ``--`` in ``command`` ends option parsing in ``args`` too); each
    occurrence is then located in its own field, ``index`` counted within that field.
    """
    argv: list[str] = []
    spans: list[tuple[str, int]] = []
    for name, values in fields:
        spans.append((name, len(argv)))
        if isinstance(values, list):
            argv.extend(t for t in values if isinstance(t, str))
    located = []
    for occurrence in find_dtype_flags(argv, engine, version):
        name, start = next((n, s) for n, s in reversed(spans) if s <= occurrence.index)
        located.append(replace(occurrence, index=occurrence.index - start, field=name))
    return located


# --- What an engine makes of an argv ------------------------------------------------------

#: ``FlagReading.state``: the engine runs ``value``; runs its default (no flag); exits with
#: ``error``; or this tool cannot say (an engine it does not know, a value its tables do not list).
VALUE, ABSENT, FAILED, UNSURE = "value", "absent", "failed", "unknown"
#: ``FlagReading.stage`` of a failure: argparse refuses the argv, or the engine refuses the value
#: after parsing (vLLM 0.33+ checks no choices in its parser).
AT_PARSING, AT_START = "argument parsing", "engine start"


@dataclass(frozen=True)
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

    @property
    def runs(self) -> bool:
        """Whether the engine gets past reading the flag (it may still be UNSURE)."""
        return self.state in (VALUE, ABSENT, UNSURE)


def read_flag(fields: Sequence[tuple[str, object]], engine: Optional[str], version: object) -> FlagReading:
    """What ``engine`` (canonical name, None when unknown) at ``version`` makes of the argv ``fields``.

    argparse reads the argv left to right and checks each occurrence's value against the choices
    as it reads it: the first refused value (or missing value, or ambiguous abbreviation) ends the
    process, even when a later copy is valid. Entries it does not recognise end it after the whole
    argv is read. Only when every copy passes does the last one win. vLLM 0.33+ checks no choices
    in the parser; the value that wins is refused at engine start instead. A value the tables do
    not list makes the reading UNSURE, never FAILED.
    """
    found = tuple(find_in_fields(fields, engine, version))
    if engine not in ENGINES:
        read = [o for o in found if o.read]
        return FlagReading(UNSURE if found else ABSENT, read[-1].value if read else None, occurrences=found,
                           culprit=read[-1] if read else None,
                           reason="the engine is neither vLLM nor SGLang, so how it reads the argv is not known")
    late = engine == VLLM and _validates_late(version)
    unsure: Optional[FlagOccurrence] = None
    unrecognized = []
    for occurrence in found:
        if not occurrence.read:
            if occurrence.spelling == ABBREVIATION and "ambiguous" in occurrence.note:
                return _failed(found, occurrence, f"error: ambiguous option: {occurrence.token.partition('=')[0]} "
                                                  f"could match {FLAG}, {FLAG}-skip-layers")
            if occurrence.spelling == SPACED and engine == VLLM:
                unsure = unsure or occurrence  # vLLM may take it as its model tag and ignore it
                continue
            unrecognized.append(occurrence)
            continue
        if occurrence.value is None:
            return _failed(found, occurrence, f"error: argument {FLAG}: expected one argument")
        verdict = judge(engine, version, occurrence.value)
        if occurrence.value == "":  # no choice is empty: argparse refuses it whatever the table says
            return _failed(found, occurrence, _invalid_choice(engine, version, ""))
        if verdict.verdict == UNKNOWN:
            unsure = unsure or occurrence
        elif verdict.verdict == REJECTED and not late:
            return _failed(found, occurrence, _invalid_choice(engine, version, occurrence.value))
    if unrecognized:
        tokens = " ".join(o.token if o.value is None or "=" in o.token or o.spelling == SPACED
                          else f"{o.token} {o.value}" for o in unrecognized)
        return _failed(found, unrecognized[0], f"error: unrecognized arguments: {tokens}")
    read = [o for o in found if o.read]
    if not read:
        if unsure is not None:
            return FlagReading(UNSURE, None, occurrences=found, culprit=unsure, reason=unsure.note)
        return FlagReading(ABSENT, occurrences=found)
    last = read[-1]
    judged = judge(engine, version, last.value or "")
    if late and judged.verdict == REJECTED:
        return _failed(found, last, f"{judged.reason}: the engine exits at start-up", AT_START)
    if unsure is not None:
        why = (judge(engine, version, unsure.value or "").reason if unsure.read else unsure.note)
        return FlagReading(UNSURE, last.value, occurrences=found, culprit=last, reason=why)
    return FlagReading(VALUE, last.value, occurrences=found, culprit=last)


def _validates_late(version: object) -> bool:
    """vLLM 0.33+ (or the reference version when unreadable) checks no choices in its parser."""
    try:
        return _validates_late_cached(version)
    except TypeError:  # an unhashable version from a hand-written manifest
        return _validates_late_cached(None)


@functools.lru_cache(maxsize=256)
def _validates_late_cached(version: object) -> bool:
    return (parse_version(version) or _v(REFERENCE_VERSIONS[VLLM])) >= _v(_VLLM_LATE_VALIDATION_FROM)


def _failed(found: tuple[FlagOccurrence, ...], culprit: FlagOccurrence, error: str,
            stage: str = AT_PARSING) -> FlagReading:
    return FlagReading(FAILED, None, error, found, stage, culprit)


def _invalid_choice(engine: str, version: object, value: str) -> str:
    """argparse's own words for a refused choice; the list names the spellings this tool knows."""
    at = parse_version(version) or _v(REFERENCE_VERSIONS[engine])
    known = [s for s, windows in _ACCEPTED[engine].items() if any(w.contains(at) for w in windows)]
    return (f"error: argument {FLAG}: invalid choice: {value!r} "
            f"(choose from {', '.join(repr(s) for s in known)}, ...)")
