"""The kubectl-style global flags, shared by every parser and sub-parser of the command line.

kubectl parses none of its flags for a plugin: everything typed after ``kubectl kvdtype`` reaches the
plugin verbatim (and kubectl refuses flags typed before the plugin's name). So the plugin parses
kubectl's own (``--kubeconfig``, ``--context``, ``-n``, ``-A``, ``--server``, ``--token``...) and
accepts each of them before or after the subcommand. ``add_global_flags`` defines them once: the
top-level parser lists them with their defaults, every subcommand's parser reads them too, hidden
from its ``--help`` (which points to the top-level one), and ``Subcommands`` is the rule that joins
the two: a later value wins, repeatable flags add up.
"""

from __future__ import annotations

import argparse
import math
import re
from typing import Any, Callable, NoReturn, Optional, Sequence

from kubectl_kvdtype._kits.display import cut
from kubectl_kvdtype._kits.records import record_type
from kubectl_kvdtype._kits.secrets import HEADER_REFUSAL, breaks_header
from kubectl_kvdtype._kits.settings import FALSE_WORDS, TRUE_WORDS
from kubectl_kvdtype._kits.status import UsageError
from kubectl_kvdtype._output.format import EVERY, JUDGING, Format
from kubectl_kvdtype._output.render import FORMATS
from kubectl_kvdtype._sources.connection import CONNECTION_FLAGS, REPEATED, SELECTING, SWITCH, ConnectionFlag

#: Seconds one API request may take, retries included, unless --request-timeout says otherwise.
DEFAULT_REQUEST_TIMEOUT = 30.0

#: The global flags other than the connection flags, and their defaults (``defaults``).
_OTHER_DEFAULTS: dict[str, Any] = {
    "namespace": None, "all_namespaces": False, "request_timeout": DEFAULT_REQUEST_TIMEOUT,
    "output": FORMATS[0].name, "no_headers": False, "filename": [], "system_namespace": "gpustack-system",
    "exit_zero": False, "ignore": [],
}


def defaults(connection: Sequence[ConnectionFlag] = CONNECTION_FLAGS) -> dict[str, Any]:
    """The global flags' defaults (the top-level parser's; a subcommand's parser has none, so that
    a flag given before the subcommand's name keeps its value)."""
    return {**{flag.dest: flag.default for flag in connection}, **_OTHER_DEFAULTS}


DEFAULTS = defaults()


def secret_flags(connection: Sequence[ConnectionFlag] = CONNECTION_FLAGS) -> tuple[str, ...]:
    """Flags whose values are secrets: never echoed (``redact``)."""
    return tuple(name for flag in connection if flag.secret for name in flag.names if name.startswith("--"))


SECRET_FLAGS = secret_flags()
#: kubectl's boolean flags also take ``=true``/``=false``; argparse's store_true takes no value.
_BOOLEANS = ("--all-namespaces", "--no-headers", "--exit-zero")
_TRUE = TRUE_WORDS
_FALSE = FALSE_WORDS

#: The longest duration any flag takes (a week): past it a timer overflows the platform's clock,
#: and no request or wait of this tool should last longer.
MAX_DURATION = 7 * 24 * 3600.0
#: What a usage error about a duration shows.
DURATION_FORMS = ("accepted forms: 10m, 90s, 1m30s, 500ms, 1h, .5s, 250us (Go's durations, as kubectl takes "
                  "them), or plain seconds; at most 168h")
#: Go's time.ParseDuration units, in nanoseconds (``us``, ``µs`` (U+00B5) and ``μs`` (U+03BC) alike).
_UNIT_NANOSECONDS = {"ns": 1, "us": 1_000, "\u00b5s": 1_000, "\u03bcs": 1_000, "ms": 1_000_000,
                     "s": 1_000_000_000, "m": 60_000_000_000, "h": 3_600_000_000_000}
_GO_ELEMENT = re.compile(r"(\d*)(?:\.(\d*))?([^\d.]*)")
_PLAIN_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_SIGNED_WHOLE = re.compile(r"[+-]?[0-9]{1,19}")
_MAX_NANOSECONDS = (1 << 63) - 1


def go_duration(text: str) -> Optional[float]:
    """Seconds of a duration in Go's ``time.ParseDuration`` grammar (``1h30m``, ``+5s``, ``.5s``,
    ``5.s``, ``5us``, ``5µs``, ``-0s``; ``0`` alone needs no unit), negative ones included;
    None for anything Go refuses; infinity for one past its 64-bit nanoseconds (Go refuses it too)."""
    rest = text[1:] if text[:1] in "+-" else text
    negative = text[:1] == "-"
    if rest == "0":
        return 0.0
    if not rest:
        return None
    total = 0
    while rest:
        match = _GO_ELEMENT.match(rest)
        assert match is not None  # every part of the pattern may be empty
        whole, fraction, unit = match.group(1), match.group(2), match.group(3)
        if not whole and not fraction or unit not in _UNIT_NANOSECONDS:  # ".s", "5", "5x"
            return None
        scale = _UNIT_NANOSECONDS[unit]
        total += int(whole or "0") * scale
        if fraction:
            total += int(fraction) * scale // 10 ** len(fraction)
        if total > _MAX_NANOSECONDS:
            return math.inf
        rest = rest[match.end():]
    return (-total if negative else total) / 1e9


def parse_duration(text: str, negative: bool = False) -> float:
    """Seconds of a duration: Go's grammar, as kubectl reads ``--request-timeout`` (see
    ``go_duration``), or plain seconds (``10``, ``2.5``); blanks around it are ignored. A negative
    one is refused unless ``negative`` (then it is returned as it is)."""
    value = text.strip()
    seconds = float(value) if _PLAIN_SECONDS.fullmatch(value) else go_duration(value)
    if seconds is None:
        raise argparse.ArgumentTypeError(f"invalid duration {cut(text)!r} ({DURATION_FORMS})")
    if seconds < 0 and not negative:
        raise argparse.ArgumentTypeError(f"invalid duration {cut(text)!r}: it is negative ({DURATION_FORMS})")
    if seconds > MAX_DURATION:
        raise argparse.ArgumentTypeError(f"invalid duration {cut(text)!r}: longer than the maximum, 168h")
    return seconds


def _request_timeout(text: str) -> Optional[float]:
    """kubectl's ``--request-timeout``: a whole number is seconds, else a Go duration; ``0`` and,
    as in kubectl, a negative one mean no limit; an empty value leaves the default (kubectl's too)."""
    if not text.strip():
        return DEFAULT_REQUEST_TIMEOUT
    whole = _SIGNED_WHOLE.fullmatch(text.strip())  # kubectl's strconv.ParseInt first: "+5", "-0", "05"
    seconds = float(int(whole.group())) if whole and int(whole.group()) >= 0 else parse_duration(text, negative=True)
    if seconds > MAX_DURATION:  # kubectl takes any: past a week a timer overflows (``parse_duration``)
        raise argparse.ArgumentTypeError(f"invalid duration {cut(text)!r}: longer than the maximum, 168h")
    return seconds if seconds > 0 else None  # kubectl: "0" (or less) means no timeout


#: kubectl's klog levels are 32-bit (``strconv.ParseInt(value, 10, 32)``).
_LEVEL = re.compile(r"[+-]?[0-9]+")
_INT32 = 1 << 31
#: The profiles kubectl's ``--profile`` names (``none``, its default, asks for none).
PROFILES = ("none", "cpu", "heap", "goroutine", "threadcreate", "block", "mutex", "trace")
#: The proxy schemes client-go takes in ``proxy-url`` and ``--proxy-url``.


def _level(text: str) -> int:
    """kubectl's ``-v``: a whole number of 32 bits (``+6``, ``06`` and ``-1`` too, as Go parses them)."""
    if not _LEVEL.fullmatch(text):
        raise argparse.ArgumentTypeError(f"invalid level {cut(text)!r}: a whole number, as kubectl's -v takes it")
    level = int(text)
    if not -_INT32 <= level < _INT32:
        raise argparse.ArgumentTypeError(f"invalid level {cut(text)!r}: out of range (kubectl's levels are 32-bit)")
    return level


def _extra(text: str) -> str:
    """``--as-user-extra KEY=VALUE`` (the first ``=`` divides; the key may be empty, as kubectl sends
    it). One without ``=``, which kubectl drops without a word, is refused."""
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"invalid user extra {cut(text)!r}: expected KEY=VALUE (kubectl "
                                         "would drop it unsaid)")
    return text


def _proxy_url(text: str) -> str:
    """``--proxy-url`` as kubectl checks it: the kubeconfig's ``proxy-url`` rule
    (``_sources.proxy.configured``: the same words, its password never echoed); an empty one
    overrides nothing, as in kubectl."""
    from kubectl_kvdtype._kits.status import KvdtypeError
    from kubectl_kvdtype._sources.proxy import configured

    if text:
        try:
            configured(text, "proxy-url")
        except KvdtypeError as refused:
            raise argparse.ArgumentTypeError(refused.message) from None
    return text


def _profile(text: str) -> str:
    if text not in PROFILES:
        raise argparse.ArgumentTypeError(f"unknown profile {cut(text)!r} (kubectl's: {'|'.join(PROFILES)})")
    return text


def _vmodule(text: str) -> str:
    """klog's ``--vmodule``: ``pattern=N`` items, comma-separated (an empty item skipped, N a
    whole number from 0), refused in klog's words."""
    for item in (part for part in text.split(",") if part):
        pattern, equals, level = item.partition("=")
        if not equals or not pattern or "=" in level or not _LEVEL.fullmatch(level) \
                or not -_INT32 <= int(level) < _INT32:
            raise argparse.ArgumentTypeError(f"invalid value {cut(text)!r}: syntax error: expect comma-separated "
                                             "list of filename=N")
        if int(level) < 0:
            raise argparse.ArgumentTypeError(f"invalid value {cut(text)!r}: negative value for vmodule level")
    return text


def _flush_frequency(text: str) -> float:
    """``--log-flush-frequency``: a Go duration above zero (kubectl ends in a Go panic at zero or less)."""
    seconds = go_duration(text.strip())
    if seconds is None:
        raise argparse.ArgumentTypeError(f"invalid duration {cut(text)!r} ({DURATION_FORMS})")
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"invalid duration {cut(text)!r}: it must be above zero")
    return seconds


#: How a connection flag's value is checked (``ConnectionFlag.form``), each as kubectl checks it.
VALUE_FORMS: dict[str, Callable[[str], Any]] = {
    "level": _level, "extra": _extra, "proxy-url": _proxy_url, "profile": _profile, "vmodule": _vmodule,
    "flush": _flush_frequency,
}


def check_refused(options: Any, connection: Sequence[ConnectionFlag] = CONNECTION_FLAGS) -> None:
    """A kubectl flag with no meaning for the plugin, given with a value that asks for something
    (``ConnectionFlag.refused``), is a usage error that says why."""
    for flag in connection:
        value = getattr(options, flag.dest, None)
        if flag.refused and value and value not in flag.idle:
            raise UsageError(f"{flag.flag} {flag.refused}")


def normalize_booleans(argv: Sequence[str], connection: Sequence[ConnectionFlag] = CONNECTION_FLAGS) -> list[str]:
    """``--insecure-skip-tls-verify=true`` as kubectl (pflag) reads it: the bare flag, and ``=false``
    as not given (kubectl's override of a false value changes nothing in the kubeconfig either)."""
    booleans = _BOOLEANS + tuple(flag.flag for flag in connection if flag.value == SWITCH)
    words: list[str] = []
    for word in argv:
        name, equals, value = word.partition("=")
        if equals and name in booleans and value.lower() in _TRUE + _FALSE:
            if value.lower() in _TRUE:
                words.append(name)
            continue
        words.append(word)
    return words


def secrets_in(argv: Sequence[str], connection: Sequence[ConnectionFlag] = CONNECTION_FLAGS) -> list[str]:
    """The values given to the secret flags, ``--token``/``--password`` (``--token=T``, ``--token T``,
    and their abbreviations, which the parser refuses as unrecognized words it would echo), to keep
    out of messages."""
    secrets = secret_flags(connection)
    found = []
    for index, word in enumerate(argv):
        name, equals, value = word.partition("=")
        if len(name) > 2 and name.startswith("--") and any(flag.startswith(name) for flag in secrets):
            value = value if equals else (argv[index + 1] if index + 1 < len(argv) else "")
            if value:
                found.append(value)
    return found


def check_header_flags(options: Any, connection: Sequence[ConnectionFlag] = CONNECTION_FLAGS) -> None:
    """A value of a flag that becomes an HTTP header value (``Authorization``, ``Impersonate-*``)
    with a line break is a usage error that never echoes the value. Of an impersonation extra's
    ``KEY=VALUE``, the value: its key is percent-encoded into the header's name."""
    for row in (row for row in connection if row.header):
        value = getattr(options, row.dest, None)
        values = value if isinstance(value, list) else [value]
        if row.form == "extra":
            values = [str(v).partition("=")[2] for v in values if v is not None]
        if any(breaks_header(v) for v in values):
            raise UsageError(f"{row.flag} holds {HEADER_REFUSAL} (the value is not shown)")


EXAMPLES_HEADING = "examples:"


def examples_epilog(examples: Sequence[tuple[str, str]], before: str = "") -> str:
    """The end of a ``--help``: ``before`` (wrapped as usual), then the examples, kept as written."""
    lines = [EXAMPLES_HEADING] + [line for comment, command in examples for line in (f"  # {comment}", f"  {command}")]
    return (before + "\n\n" if before else "") + "\n".join(lines)


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, except that an ``examples:`` paragraph keeps its lines as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        head, marker, examples = text.partition(EXAMPLES_HEADING)
        filled = super()._fill_text(head, width, indent) if head.strip() else ""
        if not marker:
            return filled
        return (filled + "\n\n" if filled else "") + indent + marker + examples


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one sentence and exit status 2 via UsageError, and
    whose subcommands add up the global flags given before and after their names (``Subcommands``)."""

    #: The formatter the command line's building gets (see ``_get_formatter``); made at its first use.
    _building_formatter: Optional[argparse.HelpFormatter] = None
    _building = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # kubectl's grammar (pflag): a long flag is taken only as spelled, never abbreviated
        # (``--names=x`` is no ``--namespace``, ``--v=4`` no ``--version``). Every parser and
        # subparser of the command line is one of these, so none abbreviates.
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")

    def add_subparsers(self, **kwargs: Any) -> Any:
        kwargs.setdefault("action", Subcommands)
        return self._built_by(super().add_subparsers, **kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        return self._built_by(super().add_argument, *args, **kwargs)

    def _built_by(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        self._building = True
        try:
            return method(*args, **kwargs)
        finally:
            self._building = False

    def _get_formatter(self) -> argparse.HelpFormatter:
        # add_argument asks for a new formatter at each argument, only to check its metavar
        # against its nargs, and add_subparsers for the subcommands' prog (a short usage line);
        # each new one measures the terminal (importing shutil): hundreds of times while the
        # command line is built, for nothing it prints. The building gets one formatter of a fixed
        # width, made once; help and usage get argparse's own, as always.
        if not self._building:
            return super()._get_formatter()
        if self._building_formatter is None:
            self._building_formatter = HelpFormatter(prog=self.prog, width=80)
        return self._building_formatter


class Subcommands(argparse._SubParsersAction):
    """The one rule for where global flags go: before or after any subcommand's name, a later value
    winning and the repeatable ones adding up (``-f a check -f b``: both). argparse parses a
    subcommand's words into a fresh namespace and copies it over, so a repeatable flag given after
    the name would replace the values given before it: they are put back in front here."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: Optional[str] = None) -> None:
        repeated = {a.dest for a in parser._actions if getattr(a, "global_flag", False)
                    and isinstance(a, argparse._AppendAction)}
        before = {dest: getattr(namespace, dest) for dest in repeated if hasattr(namespace, dest)}
        super().__call__(parser, namespace, values, option_string)
        for dest, items in before.items():
            after = getattr(namespace, dest)
            if after is not items:
                setattr(namespace, dest, list(items) + list(after))


def output_help(formats: Sequence[Format], judging: Sequence[str]) -> str:
    """``-o``'s help, from the formats table: each format (the first the default), a format of one
    subcommand with its users, then which formats go with the judging subcommands only."""
    described = []
    for index, form in enumerate(formats):
        notes = ["default"] if index == 0 else []
        if form.takes not in (EVERY, JUDGING):
            notes.append(f"{form.users(judging)}: {form.help}" if form.help else form.users(judging))
        elif form.help:
            notes.append(form.help)
        described.append(form.name + "".join(f" ({note})" for note in notes))
    text = ", ".join(described[:-1]) + (", or " if len(described) > 1 else "") + described[-1]
    judged = [form.name for form in formats if form.takes == JUDGING]
    if judged:
        text += f"; {' and '.join(judged)} with {', '.join(judging)}"
    return text


@record_type(frozen=True)
class Tables:
    """What the global flags are built from: the ``-o`` formats, the subcommands that judge objects
    (the registry's), and the connection flags."""

    formats: tuple[Format, ...] = FORMATS
    judging: tuple[str, ...] = ()
    connection: tuple[ConnectionFlag, ...] = CONNECTION_FLAGS


#: The heading of the global flags in the top-level ``--help``.
GLOBAL_HEADING = "global flags (every subcommand takes them, before or after its name)"


def global_pointer(prog: str) -> str:
    """What a subcommand's ``--help`` says of the global flags, instead of listing them again."""
    return (f"-n, -A, -o, -f, --context, --kubeconfig, --server, --token, --as and the other global flags, "
            f"before or after the subcommand: '{prog} --help' lists them")


def add_global_flags(parser: argparse.ArgumentParser, tables: Tables = Tables(), hidden: bool = False,
                     pointer: str = "") -> None:
    """The global flags, defined here once: on the top-level parser with their defaults and help
    (``hidden`` False), and on every subcommand's parser hidden from its help and without defaults,
    so that a flag given after the subcommand's name is still read and one given before it is not
    overwritten (``Subcommands``); ``pointer`` is what that subcommand's help says instead."""
    flags = parser.add_argument_group("global flags" if hidden else GLOBAL_HEADING, pointer or None)
    initial = defaults(tables.connection)

    def add(*names: str, help: str, **kwargs: Any) -> argparse.Action:
        dest = kwargs.get("dest") or next(n for n in names if n.startswith("--"))[2:].replace("-", "_")
        default = argparse.SUPPRESS if hidden else initial[dest]
        action = flags.add_argument(*names, default=default, help=argparse.SUPPRESS if hidden else help, **kwargs)
        action.global_flag = True  # type: ignore[attr-defined]  # read by Subcommands and _cli.complete
        return action

    add_connection_flags(add, [flag for flag in tables.connection if flag.dest in SELECTING])
    add("-n", "--namespace", help="the namespace in scope (default: the context's)")
    add("-A", "--all-namespaces", action="store_true", help="every namespace")
    add("--request-timeout", type=_request_timeout, metavar="DURATION",
        help="how long one API request may take (connecting, the answer's headers and body), retries "
             "included, and the kubeconfig's exec credential plugin too (default 30s, where kubectl "
             "has no limit; at most 168h; 0: no limit)")
    add_connection_flags(add, [flag for flag in tables.connection if flag.dest not in SELECTING])
    add("-o", "--output", choices=[form.name for form in tables.formats],
        help=output_help(tables.formats, tables.judging))
    add("--no-headers", action="store_true", help="tables without headers and summary")
    add("-f", "--filename", action="append", metavar="PATH",
        help="read objects from manifests instead of a cluster: a file, a directory, or - (repeatable)")
    add("--system-namespace", metavar="NAMESPACE",
        help="the operator's namespace, where the Setting lives (default gpustack-system)")
    add("--exit-zero", action="store_true",
        help="exit 0 even with findings that fail the run (see --fail-on); never when the run is incomplete (3, 4)")
    add("--ignore", action="append", metavar="CODE", help="drop findings with this code (repeatable)")


def add_judging_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of every subcommand that judges objects (check, find-flags, verify, preflight):
    one definition, so they read alike everywhere (``_kits.report.fails`` applies ``--fail-on``)."""
    from kubectl_kvdtype._kits.report import ERROR, FAIL_ON  # here: --help and --version import no report

    parser.add_argument("--fail-on", choices=FAIL_ON, default=ERROR,
                        help="the least severity that fails the run: exit 1 (preflight: NO-GO) and a failure "
                             "in -o junit (default error; warning: warnings too)")
    add_fleet_flags(parser)


#: Contexts judged at once by --contexts/--all-contexts unless --parallel says otherwise: each one
#: waits on its cluster most of its time (on a link tens of milliseconds away, most of a small
#: one's run), and a 10,000-deployment context holds up to ~150 MB while it is judged, so eight keep
#: two cores busy within ~1.2 GB (docs/reference.md, "Fleets").
DEFAULT_PARALLEL = 8


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"invalid value {cut(text)!r}: a whole number from 1")
    return value


def add_fleet_flags(parser: argparse.ArgumentParser) -> None:
    """The same judging run on several kubeconfig contexts (``_cli.fleet``): judging subcommands only."""
    fleet = parser.add_argument_group("fleet (the same run on several kubeconfig contexts)")
    contexts = fleet.add_argument(
        "--contexts", action="append", default=[], metavar="NAMES",
        help="run on each of these kubeconfig contexts: comma-separated names or shell-style globs such as "
             "'prod-*' (repeatable; in the order named)")
    contexts.completer = "contexts"  # type: ignore[attr-defined]  # read by _cli.complete
    contexts.comma_separated = True  # type: ignore[attr-defined]
    fleet.add_argument("--all-contexts", action="store_true", default=False,
                       help="run on every context of the kubeconfig (sorted by name)")
    # No default here: a --parallel given without a fleet is refused (``_cli``), then the default is set.
    fleet.add_argument("--parallel", type=_positive_int, default=None, metavar="N",
                       help=f"with --contexts/--all-contexts: contexts judged at once (default {DEFAULT_PARALLEL})")


def fleet_requested(options: argparse.Namespace) -> bool:
    """Whether the run is a fleet's (``--contexts``/``--all-contexts``): only then is ``_cli.fleet`` imported."""
    return bool(getattr(options, "contexts", None) or getattr(options, "all_contexts", False))


def add_connection_flags(add: Callable[..., argparse.Action], connection: Sequence[ConnectionFlag]) -> None:
    """kubectl's flags saying which cluster and who, from their table (``_sources.connection``), with
    kubectl's meaning: each overrides the same setting of the kubeconfig (see ``_sources.kubeconfig``)."""
    for flag in connection:
        kind: dict[str, Any] = {"action": "store_true"} if flag.value == SWITCH else \
            {"action": "append", "dest": flag.dest, "metavar": flag.metavar} if flag.value == REPEATED \
            else {"dest": flag.dest, "metavar": flag.metavar}
        if flag.form:
            kind["type"] = VALUE_FORMS[flag.form]
        action = add(*flag.names, help=flag.help, **kind)
        if flag.completes:
            action.completer = flag.completes  # type: ignore[attr-defined]  # read by _cli.complete
