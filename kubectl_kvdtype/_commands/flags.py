"""The kubectl-style global flags, shared by every parser and sub-parser of the command line.

kubectl parses none of its flags for a plugin: everything typed after ``kubectl kvdtype`` reaches the
plugin verbatim (and kubectl refuses flags typed before the plugin's name). So the plugin parses
kubectl's own (``--kubeconfig``, ``--context``, ``-n``, ``-A``, ``--server``, ``--token``...) and
accepts each of them before or after the subcommand: they are defined on every parser with
suppressed defaults, and ``DEFAULTS`` fills what was not given.
"""

from __future__ import annotations

import argparse
import re
from typing import Any, NoReturn, Optional, Sequence

from kubectl_kvdtype._kits.report import ERROR, FAIL_ON
from kubectl_kvdtype._kits.secrets import breaks_header
from kubectl_kvdtype._kits.status import UsageError
from kubectl_kvdtype._output.render import EVERY, FORMATS, JUDGING, Format
from kubectl_kvdtype._sources.connection import CONNECTION_FLAGS, REPEATED, SELECTING, SWITCH, ConnectionFlag

#: Seconds one API request may take, retries included, unless --request-timeout says otherwise.
DEFAULT_REQUEST_TIMEOUT = 30.0
#: The longest --request-timeout accepted (0, no limit, aside): a typo (30h for 30s) is refused.
MAX_REQUEST_TIMEOUT = 3600.0

#: The global flags other than the connection flags, and their defaults (``defaults``).
_OTHER_DEFAULTS: dict[str, Any] = {
    "namespace": None, "all_namespaces": False, "request_timeout": DEFAULT_REQUEST_TIMEOUT,
    "output": FORMATS[0].name, "no_headers": False, "filename": [], "system_namespace": "gpustack-system",
    "exit_zero": False, "ignore": [],
}


def defaults(connection: Sequence[ConnectionFlag] = CONNECTION_FLAGS) -> dict[str, Any]:
    """Global flags' defaults, applied after parsing so a flag given after the subcommand is not
    overwritten by the subcommand parser's default (the flags are defined on both parsers)."""
    return {**{flag.dest: flag.default for flag in connection}, **_OTHER_DEFAULTS}


def appended(connection: Sequence[ConnectionFlag] = CONNECTION_FLAGS) -> tuple[str, ...]:
    """The repeatable global flags (their dests), merged from before and after the subcommand."""
    return ("filename", "ignore", *(flag.dest for flag in connection if flag.value == REPEATED))


DEFAULTS = defaults()
APPENDED = appended()


def secret_flags(connection: Sequence[ConnectionFlag] = CONNECTION_FLAGS) -> tuple[str, ...]:
    """Flags whose values are secrets: never echoed (``redact``)."""
    return tuple(name for flag in connection if flag.secret for name in flag.names if name.startswith("--"))


SECRET_FLAGS = secret_flags()
#: kubectl's boolean flags also take ``=true``/``=false``; argparse's store_true takes no value.
_BOOLEANS = ("--all-namespaces", "--no-headers", "--exit-zero")
_TRUE = ("true", "1", "t", "yes")
_FALSE = ("false", "0", "f", "no")

#: The longest duration any flag takes (a week): past it a timer overflows the platform's clock,
#: and no request or wait of this tool should last longer.
MAX_DURATION = 7 * 24 * 3600.0
#: What a usage error about a duration shows.
DURATION_FORMS = "accepted forms: 10m, 90s, 1m30s, 500ms, 1h, or plain seconds; at most 168h"
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds from kubectl-style durations: ``30s``, ``1m30s``, ``500ms``, or plain seconds."""
    value = text.strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", value):
        seconds = float(value)
    else:
        parts = _DURATION.findall(value)
        if not parts or "".join(n + u for n, u in parts) != value:
            raise argparse.ArgumentTypeError(f"invalid duration {text!r} ({DURATION_FORMS})")
        seconds = sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)
    if seconds > MAX_DURATION:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}: longer than the maximum, 168h")
    return seconds


def _request_timeout(text: str) -> Optional[float]:
    seconds = parse_duration(text)
    if seconds > MAX_REQUEST_TIMEOUT:
        raise argparse.ArgumentTypeError(f"{text!r} is longer than the most a request may take "
                                         f"({MAX_REQUEST_TIMEOUT:g}s; 0 waits without limit)")
    return seconds or None  # kubectl: "0" means no timeout


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
    and the abbreviations argparse accepts or calls ambiguous), to keep out of messages."""
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
    with a line break is a usage error that never echoes the value."""
    for attribute, flag in ((row.dest, row.flag) for row in connection if row.header):
        value = getattr(options, attribute, None)
        values = value if isinstance(value, list) else [value]
        if any(breaks_header(v) for v in values):
            raise UsageError(f"{flag} holds a line break (CR or LF) or a NUL, which no HTTP header may carry "
                             "(the value is not shown)")


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
    """An ArgumentParser whose usage errors are one sentence and exit status 2 via UsageError.

    ``formats``, ``judging`` and ``connection``: the formats table ``-o`` offers, the subcommands that
    judge objects and the connection flags' table, which ``add_global_flags`` reads (the builder of
    the command line sets them)."""

    formats: Sequence[Format] = FORMATS
    judging: Sequence[str] = ()
    connection: Sequence[ConnectionFlag] = CONNECTION_FLAGS

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


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


def add_global_flags(parser: argparse.ArgumentParser, suffix: str = "",
                     like: Optional[argparse.ArgumentParser] = None) -> None:
    """The kubectl flags; ``suffix`` keeps the subcommand's appended lists apart to merge them.
    The formats table ``-o`` offers and the judging subcommands are ``like``'s (default: the
    parser's own), as the command line's builder set them (``Parser.formats``, ``Parser.judging``)."""
    formats = getattr(like or parser, "formats", FORMATS)
    judging = getattr(like or parser, "judging", ())
    connection = getattr(like or parser, "connection", CONNECTION_FLAGS)
    parser.formats, parser.judging = formats, judging  # type: ignore[attr-defined]  # for nested parsers
    parser.connection = connection  # type: ignore[attr-defined]
    flags = parser.add_argument_group("global flags (also accepted before the subcommand)")
    s = argparse.SUPPRESS
    add_connection_flags(flags, suffix, [flag for flag in connection if flag.dest in SELECTING])
    flags.add_argument("-n", "--namespace", default=s, help="the namespace in scope (default: the context's)")
    flags.add_argument("-A", "--all-namespaces", action="store_true", default=s, help="every namespace")
    flags.add_argument("--request-timeout", type=_request_timeout, default=s, metavar="DURATION",
                       help="how long one API request may take (connecting, the answer's headers and body), retries "
                            "included, and the kubeconfig's exec credential plugin too (default 30s, where kubectl "
                            f"has no limit; at most {MAX_REQUEST_TIMEOUT:g}s; 0: no limit)")
    add_connection_flags(flags, suffix, [flag for flag in connection if flag.dest not in SELECTING])
    flags.add_argument("-o", "--output", choices=[form.name for form in formats], default=s,
                       help=output_help(formats, judging))
    flags.add_argument("--no-headers", action="store_true", default=s, help="tables without headers and summary")
    flags.add_argument("-f", "--filename", action="append", dest="filename" + suffix, default=s, metavar="PATH",
                       help="read objects from manifests instead of a cluster: a file, a directory, or - (repeatable)")
    flags.add_argument("--system-namespace", default=s, metavar="NAMESPACE",
                       help="the operator's namespace, where the Setting lives (default gpustack-system)")
    flags.add_argument("--exit-zero", action="store_true", default=s,
                       help="exit 0 even with findings that fail the run (see --fail-on)")
    flags.add_argument("--ignore", action="append", dest="ignore" + suffix, default=s, metavar="CODE",
                       help="drop findings with this code (repeatable)")


def add_judging_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of every subcommand that judges objects (check, find-flags, verify, preflight):
    one definition, so they read alike everywhere (``_report.fails`` applies ``--fail-on``)."""
    parser.add_argument("--fail-on", choices=FAIL_ON, default=ERROR,
                        help="the least severity that fails the run: exit 1 (preflight: NO-GO) and a failure "
                             "in -o junit (default error; warning: warnings too)")
    add_fleet_flags(parser)


#: Contexts judged at once by --contexts/--all-contexts unless --parallel says otherwise: each one
#: waits on its cluster most of its time, and a 10,000-deployment context holds up to ~200 MB while
#: it is judged, so four keep two cores busy within ~0.8 GB (docs/reference.md, "Fleets").
DEFAULT_PARALLEL = 4


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: a whole number from 1")
    return value


def add_fleet_flags(parser: argparse.ArgumentParser) -> None:
    """The same judging run on several kubeconfig contexts (``_fleet``): judging subcommands only."""
    fleet = parser.add_argument_group("fleet (the same run on several kubeconfig contexts)")
    contexts = fleet.add_argument(
        "--contexts", action="append", default=[], metavar="NAMES",
        help="run on each of these kubeconfig contexts: comma-separated names or shell-style globs such as "
             "'prod-*' (repeatable; in the order named)")
    contexts.completer = "contexts"  # type: ignore[attr-defined]  # read by _complete
    contexts.comma_separated = True  # type: ignore[attr-defined]
    fleet.add_argument("--all-contexts", action="store_true", default=False,
                       help="run on every context of the kubeconfig (sorted by name)")
    fleet.add_argument("--parallel", type=_positive_int, default=DEFAULT_PARALLEL, metavar="N",
                       help=f"with --contexts/--all-contexts: contexts judged at once (default {DEFAULT_PARALLEL})")


def add_connection_flags(flags: argparse._ActionsContainer, suffix: str = "",
                         connection: Sequence[ConnectionFlag] = CONNECTION_FLAGS) -> None:
    """kubectl's flags saying which cluster and who, from their table (``_connection``), with
    kubectl's meaning: each overrides the same setting of the kubeconfig (see ``_kubeconfig``)."""
    for flag in connection:
        kind: dict[str, Any] = {"action": "store_true"} if flag.value == SWITCH else \
            {"action": "append", "dest": flag.dest + suffix, "metavar": flag.metavar} if flag.value == REPEATED \
            else {"dest": flag.dest, "metavar": flag.metavar}
        action = flags.add_argument(*flag.names, default=argparse.SUPPRESS, help=flag.help, **kind)
        if flag.completes:
            action.completer = flag.completes  # type: ignore[attr-defined]  # read by _cli.complete
