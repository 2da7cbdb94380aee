"""The command line: the registry of subcommands, and ``main``, which owns the process's end.

``run`` parses, hands a ``Context`` to one subcommand, renders its ``Report`` and turns every
outcome (findings, usage errors, cluster failures, Ctrl-C) into an ``ExitStatus``.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from typing import Optional, Sequence

from kubectl_kvdtype import __version__
from kubectl_kvdtype._command import Command, Context
from kubectl_kvdtype._env import Environment
from kubectl_kvdtype._flags import APPENDED, DEFAULTS, Parser, add_global_flags
from kubectl_kvdtype._render import render
from kubectl_kvdtype._status import ExitStatus, KvdtypeError, UsageError
from kubectl_kvdtype.check import CheckCommand
from kubectl_kvdtype.completion import CompletionCommand, complete
from kubectl_kvdtype.escape import EscapeCommand
from kubectl_kvdtype.find_flags import FindFlagsCommand
from kubectl_kvdtype.verify import VerifyCommand

PROG = "kubectl kvdtype"

#: The registry: every subcommand, in the order ``--help`` lists them.
COMMANDS: tuple[type[Command], ...] = (CheckCommand, FindFlagsCommand, VerifyCommand, EscapeCommand,
                                       CompletionCommand)


def build_parser() -> argparse.ArgumentParser:
    """The whole command line (also read by argparse-manpage for the man page)."""
    parser = Parser(
        prog=PROG, usage=f"{PROG} [global flags] <subcommand> [flags]",
        description="Check a cluster before the gpustack-operator upgrade that hands each "
                    "KVCachePoolBinding's dtype to its engines as --kv-cache-dtype.",
        epilog="Exit codes: 0 no error finding, 1 error findings, 2 usage, 3 could not complete.",
    )
    parser.add_argument("--version", action="version", version=f"kubectl-kvdtype v{__version__}")
    add_global_flags(parser)
    subparsers = parser.add_subparsers(dest="command", metavar="<subcommand>", title="subcommands")
    for command_class in COMMANDS:
        command = command_class()
        sub = subparsers.add_parser(command.name, help=command.help, prog=f"{PROG} {command.name}",
                                    description=command.description or command.help)
        command.add_arguments(sub)
        add_global_flags(sub, suffix="_after")
        sub.set_defaults(handler=command)
    return parser


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = build_parser()
    options = parser.parse_args(argv)
    if not getattr(options, "command", None):
        raise UsageError(f"name a subcommand: {', '.join(c.name for c in COMMANDS)} (see '{PROG} --help')")
    for name in APPENDED:
        merged = list(getattr(options, name, [])) + list(getattr(options, name + "_after", []))
        setattr(options, name, merged)
    for name, default in DEFAULTS.items():
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
    if argv and argv[0] == "__complete":  # the shell scripts and kubectl_complete-kvdtype ask this
        return complete(argv[1:], env)
    try:
        options = parse(argv)
        context = Context(options=options, env=env)
        report = options.handler.run(context)
        context.annotate(report)
        if report.text is not None:  # a text result (completion): verbatim, and no cluster asked
            env.stdout.write(render(report, options.output))
            env.stdout.flush()
            return int(ExitStatus.OK)
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
    # A short-lived process holding tens of thousands of parsed objects: the cyclic garbage
    # collector would rescan them all again and again while nothing forms cycles (plain JSON),
    # costing ~30% of a 10,000-deployment run. Reference counting still frees everything.
    gc.disable()
    _restore_frozen_environment()
    if argv is None and os.path.basename(sys.argv[0]).startswith("kubectl_complete-"):
        return complete(sys.argv[1:])  # the binary linked as kubectl_complete-kvdtype (krew installs)
    return run(sys.argv[1:] if argv is None else argv)


def _restore_frozen_environment() -> None:
    """In the PyInstaller binary, give child processes (exec credential plugins such as aws,
    gke-gcloud-auth-plugin, kubelogin) the user's environment: the bootloader prepended its
    unpack directory to LD_LIBRARY_PATH (saving the user's value in LD_LIBRARY_PATH_ORIG) and set
    its own _PYI_* variables. This process is not affected: its libraries are loaded already."""
    if not getattr(sys, "frozen", False):
        return
    if sys.platform.startswith(("linux", "aix")):
        name = "LIBPATH" if sys.platform.startswith("aix") else "LD_LIBRARY_PATH"
        original = os.environ.pop(name + "_ORIG", None)
        if original is not None:
            os.environ[name] = original
        else:
            os.environ.pop(name, None)
    for name in [n for n in os.environ if n.startswith("_PYI_") or n == "_MEIPASS2"]:
        del os.environ[name]
