"""The command line: kubectl-style global flags, the registry of subcommands, and ``main``.

kubectl passes no flags to a plugin, so the plugin parses kubectl's own (``--kubeconfig``,
``--context``, ``-n``, ``-A``...) and accepts each of them before or after the subcommand.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Optional, Sequence

from kubectl_kvdtype import __version__
from kubectl_kvdtype._command import Command, Context
from kubectl_kvdtype._env import Environment
from kubectl_kvdtype._render import OUTPUTS, render
from kubectl_kvdtype._status import ExitStatus, KvdtypeError, UsageError
from kubectl_kvdtype.check import CheckCommand

PROG = "kubectl kvdtype"

#: The registry: every subcommand, in the order ``--help`` lists them.
COMMANDS: tuple[type[Command], ...] = (CheckCommand,)

#: Global flags' defaults, applied after parsing so a flag given after the subcommand is not
#: overwritten by the subcommand parser's default (the flags are defined on both parsers).
_DEFAULTS = {
    "kubeconfig": None, "context": None, "namespace": None, "all_namespaces": False,
    "request_timeout": None, "as_user": None, "output": "table", "no_headers": False,
    "filename": [], "system_namespace": "gpustack-system", "exit_zero": False, "ignore": [],
}
_APPENDED = ("filename", "ignore")

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds from kubectl-style durations: ``30s``, ``1m30s``, ``500ms``, or plain seconds."""
    value = text.strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", value):
        return float(value)
    parts = _DURATION.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r} (use e.g. 30s, 5m, 1h)")
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)


def _request_timeout(text: str) -> Optional[float]:
    seconds = parse_duration(text)
    return seconds or None  # kubectl: "0" means no timeout


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one sentence and exit status 2 via UsageError."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _add_global_flags(parser: argparse.ArgumentParser, suffix: str = "") -> None:
    """The kubectl flags; ``suffix`` keeps the subcommand's appended lists apart to merge them."""
    flags = parser.add_argument_group("global flags (also accepted before the subcommand)")
    s = argparse.SUPPRESS
    flags.add_argument("--kubeconfig", default=s, metavar="PATH", help="path to the kubeconfig file")
    flags.add_argument("--context", default=s, help="the kubeconfig context to use")
    flags.add_argument("-n", "--namespace", default=s, help="the namespace in scope (default: the context's)")
    flags.add_argument("-A", "--all-namespaces", action="store_true", default=s, help="every namespace")
    flags.add_argument("--request-timeout", type=_request_timeout, default=s, metavar="DURATION",
                       help="how long to wait for one API request (0: no limit)")
    flags.add_argument("--as", dest="as_user", default=s, metavar="USER", help="impersonate this user")
    flags.add_argument("-o", "--output", choices=OUTPUTS, default=s, help="table (default), wide, json or yaml")
    flags.add_argument("--no-headers", action="store_true", default=s, help="tables without headers and summary")
    flags.add_argument("-f", "--filename", action="append", dest="filename" + suffix, default=s, metavar="PATH",
                       help="read objects from manifests instead of a cluster: a file, a directory, or - (repeatable)")
    flags.add_argument("--system-namespace", default=s, metavar="NAMESPACE",
                       help="the operator's namespace, where the Setting lives (default gpustack-system)")
    flags.add_argument("--exit-zero", action="store_true", default=s, help="exit 0 even with error findings")
    flags.add_argument("--ignore", action="append", dest="ignore" + suffix, default=s, metavar="CODE",
                       help="drop findings with this code (repeatable)")


def build_parser() -> argparse.ArgumentParser:
    """The whole command line (also read by argparse-manpage for the man page)."""
    parser = _Parser(
        prog=PROG, usage=f"{PROG} [global flags] <subcommand> [flags]",
        description="Check a cluster before the gpustack-operator upgrade that hands each "
                    "KVCachePoolBinding's dtype to its engines as --kv-cache-dtype.",
        epilog="Exit codes: 0 no error finding, 1 error findings, 2 usage, 3 could not complete.",
    )
    parser.add_argument("--version", action="version", version=f"kubectl-kvdtype v{__version__}")
    _add_global_flags(parser)
    subparsers = parser.add_subparsers(dest="command", metavar="<subcommand>", title="subcommands")
    for command_class in COMMANDS:
        command = command_class()
        sub = subparsers.add_parser(command.name, help=command.help, prog=f"{PROG} {command.name}",
                                    description=command.description or command.help)
        command.add_arguments(sub)
        _add_global_flags(sub, suffix="_after")
        sub.set_defaults(handler=command)
    return parser


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = build_parser()
    options = parser.parse_args(argv)
    if not getattr(options, "command", None):
        raise UsageError(f"name a subcommand: {', '.join(c.name for c in COMMANDS)} (see '{PROG} --help')")
    for name in _APPENDED:
        merged = list(getattr(options, name, [])) + list(getattr(options, name + "_after", []))
        setattr(options, name, merged)
    for name, default in _DEFAULTS.items():
        if not hasattr(options, name):
            setattr(options, name, default)
    _validate(options)
    return options


def _validate(options: argparse.Namespace) -> None:
    known = {code for command in COMMANDS for code in command.codes}
    unknown = [code for code in options.ignore if code not in known]
    if unknown:
        raise UsageError(f"--ignore {unknown[0]}: no such finding code (known: {', '.join(sorted(known))})")
    if options.all_namespaces and options.namespace:
        raise UsageError("-n/--namespace and -A/--all-namespaces cannot be used together")


def run(argv: Sequence[str], env: Optional[Environment] = None) -> int:
    """Parse, run one subcommand, print its report; return the exit status (never raises)."""
    env = env or Environment()
    try:
        options = parse(argv)
        context = Context(options=options, env=env)
        report = options.handler.run(context)
        report.ignore(set(options.ignore))
        for warning in report.warnings:
            env.warn(warning)
        if not report.items and options.output in ("table", "wide"):
            print(report.empty_message, file=env.stderr)
        env.stdout.write(render(report, options.output, no_headers=options.no_headers,
                                all_namespaces=context.namespace is None, color=env.color))
        env.stdout.flush()
        return int(report.exit_status(options.exit_zero))
    except SystemExit as exit_:  # argparse after --help and --version
        return int(exit_.code or 0) if isinstance(exit_.code, int) else int(ExitStatus.USAGE)
    except KvdtypeError as error:
        print(f"error: {error.message}", file=env.stderr)
        return int(error.status)
    except KeyboardInterrupt:
        print("error: interrupted", file=env.stderr)
        return int(ExitStatus.INTERRUPTED)
    except BrokenPipeError:  # `kubectl kvdtype check | head`
        _silence_stdout()
        return int(ExitStatus.OK)


def _silence_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The console script ``kubectl-kvdtype``."""
    return run(sys.argv[1:] if argv is None else argv)
