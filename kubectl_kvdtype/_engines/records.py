"""The engines as data: one record per engine, and what each accepts as ``--kv-cache-dtype``.

The lower half of the engine knowledge (docs/engines.md, "Which spellings each engine accepts"):
the one version parser, the hand-kept spellings by version, equivalent spellings, the judgement of
one spelling by those windows (:func:`judge_spelling`, and :func:`spellings`, the same as data a
parse checks values against) and the order in which fixes are sought (:func:`suggest_by`,
:func:`remedy_by`, given who accepts a spelling). The recorded parsers
(``_engines.parsers``) and the one verdict (``_engines.verdicts``) stand on it:
``_engines.verdicts.judge`` puts a recorded parser's choices before these windows, and
``_engines.verdicts.remedy`` seeks fixes with the one verdict every subcommand asks. Nothing here
reads an argv."""


import functools
import re
from typing import Callable, Iterable, Mapping, Optional, Sequence

from kubectl_kvdtype._kits.memo import memoized
from kubectl_kvdtype._kits.records import field, record_type

FLAG = "--kv-cache-dtype"
#: Where argparse stores the flag's value (its ``dest``): what the recorded tables name it by.
FLAG_DEST = FLAG[2:].replace("-", "_")


@record_type(frozen=True, order=True)
class Version:
    """An engine version in PEP 440 order, read leniently by :func:`parse_version`.

    Ordered and compared by ``key`` alone (``0.29`` equals ``0.29.0``); ``text`` is the
    normalized spelling (``0.5.18.post1``) messages show.
    """

    key: tuple = field(repr=False)
    text: str = field(compare=False)

    def __str__(self) -> str:
        return self.text


#: PEP 440's public version, leniently: a leading ``v``, any case, ``-``/``_``/``.`` separators,
#: and whatever follows the version ignored (a local part ``+cu124``, an image tag's ``-cu124``).
#: A label must not run on into a word (``-cu124`` is no ``c`` pre-release, ``-rocm`` no post).
#: Matched against the lower-cased text: compiling it case-insensitive took four times as long,
#: at every start.
_VERSION_RE = re.compile(
    r"""^\s*v?(?P<release>\d+(?:\.\d+)*)
    (?:[-_.]?(?P<pre_l>alpha|beta|preview|pre|rc|a|b|c)(?![a-z])[-_.]?(?P<pre_n>\d*))?
    (?:-(?P<post_implicit>\d+)|[-_.]?(?P<post_l>post|rev|r)(?![a-z])[-_.]?(?P<post_n>\d*))?
    (?:[-_.]?(?P<dev_l>dev)(?![a-z])[-_.]?(?P<dev_n>\d*))?""",
    re.VERBOSE,
)
_PRE_RANK = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}
_PRE_SHOWN = ("a", "b", "rc")


def parse_version(text: object) -> Optional[Version]:
    """Read free-form engine version text ("0.29.0", "v0.5.18.post1", "0.29.0-cu124") into PEP 440
    order (the rules of ``packaging.version``, written once here); None when unreadable.

    The one version parser of the package: the spelling windows, the choice of a recorded parser
    table and every comparison of versions go through it.
    """
    if not isinstance(text, (str, int, float)) or isinstance(text, bool):
        return None
    match = _VERSION_RE.match(str(text).lower())
    if not match:
        return None
    parts = match.groupdict()
    release = tuple(int(p) for p in parts["release"].split("."))
    shown = ".".join(str(p) for p in release)
    trimmed = release
    while trimmed and trimmed[-1] == 0:
        trimmed = trimmed[:-1]
    pre = (_PRE_RANK[parts["pre_l"]], int(parts["pre_n"] or 0)) if parts["pre_l"] else None
    post_text = parts["post_implicit"] if parts["post_implicit"] is not None else parts["post_n"]
    post = int(post_text or 0) if parts["post_l"] or parts["post_implicit"] is not None else None
    dev = int(parts["dev_n"] or 0) if parts["dev_l"] else None
    if pre is not None:
        shown += f"{_PRE_SHOWN[pre[0]]}{pre[1]}"
    if post is not None:
        shown += f".post{post}"
    if dev is not None:
        shown += f".dev{dev}"
    # PEP 440: X.devN < X.aN < X.bN < X.rcN < X < X.postN; a dev release precedes its non-dev one.
    pre_key = pre if pre is not None else ((-1, 0) if dev is not None and post is None else (3, 0))
    key = (trimmed, pre_key, -1 if post is None else post, (1, 0) if dev is None else (0, dev))
    return Version(key, shown)


def known_version(text: str) -> Version:
    """A version this tool writes itself (a record's, a recorded release's): always readable."""
    parsed = parse_version(text)
    assert parsed is not None, text
    return parsed


@record_type(frozen=True)
class Window:
    """A half-open range of versions [since, until) in which a spelling is accepted."""

    since: Optional[Version] = None
    until: Optional[Version] = None

    def contains(self, version: Version) -> bool:
        return (self.since is None or version >= self.since) and (
            self.until is None or version < self.until
        )


def _since(text: str) -> tuple[Window, ...]:
    return (Window(since=known_version(text)),)


_ALWAYS = (Window(),)
#: Spellings refused by every engine at every version (the table's "no" cells for both).
_NEVER = frozenset({"FP8", "BF16", "fp16", "half"})


@record_type(frozen=True)
class Engine:
    """Everything the plugin knows about one engine: a new engine is one more record (and its tests)."""

    name: str  # canonical, as objects spell it today
    aliases: tuple[str, ...]  # other spellings objects use, compared case-insensitively
    reference_version: str  # the operator's: what a consumer of unknown version is judged against
    #: Spellings of ``--kv-cache-dtype`` the engine accepts, and in which versions.
    accepted: Mapping[str, tuple[Window, ...]]
    rejected: frozenset[str]  # spellings refused at every version
    #: Spellings meaning the same cache format for this engine, preferred first.
    equivalents: tuple[tuple[str, ...], ...]
    table: str  # its key in data/engine_options.jsonl (the recorded server parsers)
    #: What the operator renders before its own arguments and a role's extraArgs ({model}).
    base_command: tuple[str, ...]
    #: Words that start the engine in a container argv; ``x*`` matches by prefix, a program by base name.
    invocations: tuple[tuple[str, ...], ...]
    parser_words: tuple[str, ...] = ()  # what the recorded top-level parser needs before the engine's own args
    argv_rewrite: str = ""  # the engine's own argv rewriting before argparse ("flexible": vLLM's)
    #: Entry points by the invocation words that start them (the recorded tables' names for them);
    #: the first is the one an argv without such words (or with other invocation words) reaches.
    entry_points: tuple[tuple[tuple[str, ...], str], ...] = ()

    def command(self, model: str) -> list[str]:
        """The operator's base command for ``model``: what precedes its own arguments."""
        return [word.replace("{model}", model) for word in self.base_command]


VLLM_ENGINE = Engine(
    name="vLLM", aliases=("vllm",), reference_version="0.29.0",
    accepted={
        "auto": _ALWAYS,
        # fp8_e5m2 appeared in 0.3.0, went missing in 0.4.1-0.4.2 and came back in 0.4.3.
        "fp8_e5m2": (Window(known_version("0.3.0"), known_version("0.4.1")), Window(since=known_version("0.4.3"))),
        "fp8": _since("0.4.1"),
        "fp8_e4m3": _since("0.4.3"),
        "fp8_inc": _since("0.10.0"),
        "bfloat16": _since("0.11.0"),
        "fp8_ds_mla": _since("0.11.1"),
        "float16": _since("0.18.0"),
        "nvfp4": _since("0.20.0"),
        "nvfp4_4over6": _since("0.28.0"),
    },
    rejected=frozenset({"bf16", "mxfp8", "fp4_mx_block16"}) | _NEVER,
    # vLLM's fp8 means fp8_e4m3; float16 has no SGLang spelling.
    equivalents=(("fp8_e4m3", "fp8"), ("float16", "fp16", "half")),
    table="vLLM",
    base_command=("vllm", "serve", "{model}"),
    invocations=(("vllm", "serve"), ("-m", "vllm.entrypoints*")),
    parser_words=("serve",),
    argv_rewrite="flexible",
    entry_points=((("vllm", "serve"), "vllm serve"), (("-m", "vllm.entrypoints.openai.api_server"), "api_server")),
)

SGLANG_ENGINE = Engine(
    name="SGLang", aliases=("sglang",), reference_version="0.5.18",
    accepted={
        "auto": _since("0.2.14"),
        "fp8_e5m2": _since("0.2.14"),
        "fp8_e4m3": _since("0.4.2"),
        "bf16": _since("0.5.4"),
        "bfloat16": _since("0.5.4"),
        "fp4_e2m1": (Window(known_version("0.5.4.post3"), known_version("0.5.21")),),
        "mxfp8": _since("0.5.16"),
        "nvfp4": _since("0.5.16"),
        "fp4_mx_block16": _since("0.5.16"),
    },
    rejected=frozenset({"fp8", "float16", "fp8_inc", "fp8_ds_mla"}) | _NEVER,
    equivalents=(("bfloat16", "bf16"),),
    table="SGLang",
    base_command=("python3", "-m", "sglang.launch_server", "--model-path", "{model}", "--enable-metrics"),
    invocations=(("-m", "sglang.launch_server"), ("-m", "sglang.serve"), ("sglang", "serve")),
    entry_points=((("-m", "sglang.launch_server"), "launch_server"), (("sglang", "serve"), "sglang serve")),
)

RECORDS: tuple[Engine, ...] = (VLLM_ENGINE, SGLANG_ENGINE)
_BY_NAME = {r.name: r for r in RECORDS}
_BY_ALIAS = {alias.lower(): r.name for r in RECORDS for alias in (r.name, *r.aliases)}

VLLM, SGLANG = VLLM_ENGINE.name, SGLANG_ENGINE.name
ENGINES = tuple(_BY_NAME)
#: The operator's reference versions: what a consumer of unknown version is judged against.
REFERENCE_VERSIONS = {r.name: r.reference_version for r in RECORDS}


def record(engine: str) -> Engine:
    """The record of an engine by canonical name (KeyError for any other)."""
    return _BY_NAME[engine]


def _merge_classes(classes: Iterable[tuple[str, ...]]) -> tuple[tuple[str, ...], ...]:
    merged: list[list[str]] = []
    for cls in classes:
        into = next((m for m in merged if set(m) & set(cls)), None)
        if into is None:
            merged.append(list(cls))
        else:
            into += [s for s in cls if s not in into]
    return tuple(tuple(m) for m in merged)


#: Spellings that mean the same cache format for some engine, preferred spelling first.
_EQUIVALENT_CLASSES = _merge_classes(cls for r in RECORDS for cls in r.equivalents)
_CLASS_OF = {spelling: cls for cls in _EQUIVALENT_CLASSES for spelling in cls}

ACCEPTED = "accepted"
#: ``Judgement.failure``: where a refused value ends the process.
AT_PARSING_FAILURE, AT_START_FAILURE = "exits at argument parsing", "fails at engine start"
REJECTED = "rejected"
UNKNOWN = "unknown"


def canonical_engine(name: object) -> Optional[str]:
    """``vLLM``/``SGLang`` for any capitalisation (older objects say ``vllm``); else None."""
    if not isinstance(name, str):
        return None
    return _BY_ALIAS.get(name.strip().lower())


@record_type(frozen=True)
class Judgement:
    """How one engine at one version takes one dtype spelling."""

    engine: str
    version: str  # the version judged against: the consumer's own, else the reference
    version_is_reference: bool
    dtype: str
    verdict: str  # ACCEPTED | REJECTED | UNKNOWN
    reason: str  # one clause a human can read ("vLLM 0.29.0 does not accept bf16")
    #: How a rejected replica fails: AT_PARSING_FAILURE, or AT_START_FAILURE where the recorded
    #: parser lists no choices and the engine checks the value at start (``_engines.verdicts.judge`` says).
    failure: str = ""
    #: Which recorded parser the verdict used, when the version is not a recorded one (or is
    #: unreadable): "vLLM 0.34.0 is newer than the newest recorded release: the spelling judged by this
    #: tool's spelling table at 0.34.0, the argv read by vLLM 0.33.0's parser, the newest recorded".
    note: str = ""


@memoized(maxsize=4096)
def judge_spelling(engine: str, version: object, dtype: str) -> Judgement:
    """Judge ``dtype`` for ``engine`` (canonical name) at ``version`` (free text or None).

    Memoized: a cluster has few distinct (engine, version, dtype) triples and many consumers.
    """
    known = record(engine)
    parsed = parse_version(version)
    is_reference = parsed is None
    shown = known.reference_version if is_reference else str(version).strip()
    at = parsed if parsed is not None else known_version(known.reference_version)
    label = f"{engine} {shown}" + (" (reference version)" if is_reference else "")
    windows = known.accepted.get(dtype)
    if windows is not None:
        if any(window.contains(at) for window in windows):
            return Judgement(engine, shown, is_reference, dtype, ACCEPTED, f"{label} accepts {dtype}")
        return Judgement(engine, shown, is_reference, dtype, REJECTED,
                         f"{label} does not accept {dtype} ({_availability(windows)})", AT_PARSING_FAILURE)
    if dtype in known.rejected:
        return Judgement(engine, shown, is_reference, dtype, REJECTED,
                         f"{label} does not accept {dtype}", AT_PARSING_FAILURE)
    return Judgement(
        engine, shown, is_reference, dtype, UNKNOWN,
        f"{dtype} is not in this tool's table for {engine}, so it is neither confirmed nor refused",
    )


@record_type(frozen=True)
class Spellings:
    """What :func:`judge_spelling` says of every spelling at one engine version, as data: a parse
    checks a value against it (``_engines.parsers``) without asking back up. Any other value is one
    the table does not know."""

    accepted: frozenset[str]
    refused: frozenset[str]


@functools.lru_cache(maxsize=256)
def spellings(engine: str, version: Optional[str]) -> Spellings:
    """The :class:`Spellings` of ``engine`` (canonical name) at ``version`` (None: the reference),
    judged spelling by spelling, so the windows stay the one statement of them."""
    known = record(engine)
    verdicts = {spelling: judge_spelling(engine, version, spelling).verdict
                for spelling in (*known.accepted, *known.rejected)}
    return Spellings(frozenset(s for s, verdict in verdicts.items() if verdict == ACCEPTED),
                     frozenset(s for s, verdict in verdicts.items() if verdict == REJECTED))


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
    return version.text


def equivalents(dtype: str) -> tuple[str, ...]:
    """Spellings that mean the same as ``dtype``, preferred first (``dtype`` alone if none)."""
    return _CLASS_OF.get(dtype) or _CLASS_OF.get(dtype.lower()) or (dtype,)


#: ``accepts(engine, version, dtype)``: whether a consumer runs with that dtype.
Accepts = Callable[[str, object, str], bool]


def suggest_by(dtype: str, consumers: Iterable[tuple[str, object]], accepts: Accepts) -> Optional[str]:
    """A spelling meaning the same as ``dtype`` that every (engine, version) accepts, or None.

    ``accepts`` answers for one consumer (``_engines.verdicts.suggest`` passes the one verdict every
    subcommand asks)."""
    pairs = list(consumers)
    for candidate in equivalents(dtype):
        if candidate == "auto":
            continue
        if all(accepts(engine, version, candidate) for engine, version in pairs):
            return candidate
    return None


#: Cache formats by width in bits: a different dtype is sought nearest in width first.
_WIDTH = {"bfloat16": 16, "bf16": 16, "float16": 16, "fp16": 16, "half": 16, "fp8_e4m3": 8, "fp8_e5m2": 8,
          "fp8": 8, "fp8_inc": 8, "fp8_ds_mla": 8, "mxfp8": 8, "nvfp4": 4, "fp4_e2m1": 4, "fp4_mx_block16": 4}
#: Different dtypes a fix may propose, in the order preferred at equal width.
_ALTERNATIVES = ("bfloat16", "fp8_e4m3", "fp8_e5m2", "nvfp4")

REBIND, UPGRADE, REBIND_DIFFERENT, SPLIT, NO_FIX = "rebind", "upgrade", "rebind-different", "split", "none"


@record_type(frozen=True)
class Remedy:
    """What makes a rejected dtype work for every consumer, first that applies (``kind``)."""

    kind: str  # REBIND | UPGRADE | REBIND_DIFFERENT | SPLIT | NO_FIX
    text: str  # the fix as a table cell says it ("upgrade SGLang to >= 0.5.16")
    spelling: Optional[str] = None  # the dtype to rebind with (REBIND, REBIND_DIFFERENT)


def remedy_by(dtype: str, consumers: Iterable[tuple[str, object]], accepts: Accepts) -> Remedy:
    """The fix for ``dtype`` that some (engine, version) consumers reject, ``accepts`` answering
    for one consumer (``_engines.verdicts.remedy`` passes the one verdict every subcommand asks).

    In order: a spelling meaning the same that every consumer accepts; the engine versions from
    which the spelling is accepted; a different dtype every consumer accepts (it changes the
    KV-cache precision, and the fix says so); and only when consumers of different engines have no
    common spelling, splitting them by engine.
    """
    pairs = list(dict.fromkeys((e, v if isinstance(v, (str, type(None))) else str(v)) for e, v in consumers))
    same = suggest_by(dtype, pairs, accepts)
    if same:
        return Remedy(REBIND, f"rebind with {same}", same)
    upgrades = _upgrades(dtype, pairs, accepts)
    if upgrades:
        return Remedy(UPGRADE, "upgrade " + " and ".join(f"{e} to >= {v}" for e, v in upgrades.items()))
    other = _different_dtype(dtype, pairs, accepts)
    if other:
        return Remedy(REBIND_DIFFERENT, f"rebind with {other} (a different dtype)", other)
    if len({engine for engine, _ in pairs}) > 1:
        return Remedy(SPLIT, "split consumers by engine")
    return Remedy(NO_FIX, "upgrade the engine (no dtype is accepted by this version)")


def _upgrades(dtype: str, pairs: Sequence[tuple[str, object]], accepts: Accepts) -> dict[str, str]:
    """{engine: version} to upgrade to so every rejecting consumer accepts ``dtype``; {} if none will."""
    needed: dict[str, Version] = {}
    for engine, version in pairs:
        if accepts(engine, version, dtype):
            continue
        windows = record(engine).accepted.get(dtype, ())
        at = parse_version(version) or known_version(record(engine).reference_version)
        # The first version after this one from which the spelling stays accepted.
        since = [w.since for w in windows if w.until is None and w.since is not None and w.since > at]
        if not since:
            return {}
        needed[engine] = max(needed.get(engine, since[0]), since[0])
    return {engine: _show(version) for engine, version in needed.items()}


def _different_dtype(dtype: str, pairs: Sequence[tuple[str, object]], accepts: Accepts) -> Optional[str]:
    width = _WIDTH.get(dtype, 16)
    own = set(equivalents(dtype))
    candidates = sorted((c for c in _ALTERNATIVES if c not in own),
                        key=lambda c: (abs(_WIDTH[c] - width), -_WIDTH[c], _ALTERNATIVES.index(c)))
    return next((c for c in candidates
                 if all(accepts(engine, version, c) for engine, version in pairs)), None)
