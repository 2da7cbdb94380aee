"""The registry of subcommands, and the parser built from it (pip's pattern).

Each subcommand is named by its module path and class name, so the registry imports none of them:
``--version`` and ``--help`` read only this table, and a run imports only the subcommand it runs
(``_LazySubcommands`` builds its parser, with its flags, once argparse meets its name). ``build_parser()`` loads
every subcommand: the man page (argparse-manpage reads it) and completion need all their flags.
"""

from __future__ import annotations

import argparse
import importlib
from typing import TYPE_CHECKING, Any, Optional, Sequence

from kubectl_kvdtype import __version__
from kubectl_kvdtype._commands.flags import (
    HelpFormatter,
    Parser,
    Subcommands,
    Tables,
    add_global_flags,
    add_judging_flags,
    examples_epilog,
    global_pointer,
)
from kubectl_kvdtype._kits import codes as _codes
from kubectl_kvdtype._kits import settings as _settings
from kubectl_kvdtype._kits.records import record_type
from kubectl_kvdtype._kits.status import exit_codes_epilog
from kubectl_kvdtype._output.format import Format
from kubectl_kvdtype._output.render import FORMATS
from kubectl_kvdtype._sources.connection import CONNECTION_FLAGS, ConnectionFlag

if TYPE_CHECKING:  # the base of every subcommand, imported with the one a run names
    from kubectl_kvdtype._commands.command import Command

PROG = "kubectl kvdtype"
VERSION = f"kubectl-kvdtype v{__version__}"
#: Set to 1 to see the traceback of an internal error (a bug) instead of its one-line summary.
DEBUG_VARIABLE = _settings.DEBUG.name


@record_type(frozen=True)
class CommandInfo:
    """A subcommand as the registry knows it: enough for ``--help``, and where to find the rest."""

    name: str
    module: str
    class_name: str
    #: The one line ``--help`` lists it with (the only place it is written).
    help: str
    #: A subcommand that judges objects: it takes ``--fail-on`` and ``-o junit``.
    judges: bool = False

    @property
    def codes(self) -> tuple[str, ...]:
        return _codes.codes_of(self.name)

    def load(self) -> Command:
        """Import the subcommand's module (only now) and make the command."""
        command_class = getattr(importlib.import_module(self.module), self.class_name)
        return command_class()


#: Every subcommand, in the order ``--help`` lists them.
COMMANDS: tuple[CommandInfo, ...] = (
    CommandInfo("preflight", "kubectl_kvdtype.preflight", "PreflightCommand",
                "the whole pre-upgrade check: a dry run of the upgrade, a to-do list, and GO or NO-GO", judges=True),
    CommandInfo("check", "kubectl_kvdtype.check", "CheckCommand",
                "judge every Binding's dtype against the engines that consume it", judges=True),
    CommandInfo("find-flags", "kubectl_kvdtype.find_flags", "FindFlagsCommand",
                "find roles, injected Pods and Pod templates that pass --kv-cache-dtype themselves", judges=True),
    CommandInfo("verify", "kubectl_kvdtype.verify", "VerifyCommand",
                "check that every replica and injected Pod runs its Binding's dtype (optionally waiting)", judges=True),
    CommandInfo("escape", "kubectl_kvdtype.escape", "EscapeCommand",
                "the Setting escape switch, and the guided move to a corrected Binding"),
    CommandInfo("guard", "kubectl_kvdtype.guard", "GuardCommand",
                "the upgrade's rules as the cluster's own admission policies: warn (or refuse) at kubectl apply"),
    CommandInfo("completion", "kubectl_kvdtype.completion", "CompletionCommand",
                "print a shell completion script (bash, zsh or fish)"),
)


#: The man page's first examples (scripts/build-binary writes its EXAMPLES section from these and
#: every subcommand's own).
EXAMPLES = (
    ("start here: may this cluster upgrade now, and if not, what first?", f"{PROG} preflight -A"),
    ("the same over a dump, without a cluster",
     f"kubectl get kvcachepoolbindings,modeldeployments,pods,settings.gpustack.ai,deployments,statefulsets,"
     f"daemonsets,jobs,cronjobs -A -o yaml > dump.yaml && {PROG} preflight -f dump.yaml"),
    ("after the upgrade: what the replicas really run", f"{PROG} verify -A --wait"),
)


def build_parser(lazy: bool = False, formats: Sequence[Format] = FORMATS,
                 connection: Sequence[ConnectionFlag] = CONNECTION_FLAGS) -> argparse.ArgumentParser:
    """The whole command line (also read by argparse-manpage for the man page).

    ``lazy``: a subcommand's module is imported, and its flags added, only when argparse meets its
    name; ``--help`` and ``--version`` then import none. ``formats``: the table ``-o`` offers;
    ``connection``: the connection flags' table.
    """
    parser = Parser(
        prog=PROG, usage=f"{PROG} [global flags] <subcommand> [flags]",
        description="Check a cluster before the gpustack-operator upgrade that hands each "
                    "KVCachePoolBinding's dtype to its engines as --kv-cache-dtype. Start with "
                    f"'{PROG} preflight -A': one GO or NO-GO, and the to-do list behind it.",
        epilog=exit_codes_epilog() + f" {DEBUG_VARIABLE}=1 prints the traceback of an internal error.",
    )
    parser.add_argument("--version", action="version", version=VERSION)
    tables = Tables(tuple(formats), judging(), tuple(connection))
    add_global_flags(parser, tables)
    subparsers = parser.add_subparsers(dest="command", metavar="<subcommand>", title="subcommands",
                                       action=_LazySubcommands)
    assert isinstance(subparsers, _LazySubcommands)  # what action= above makes it
    subparsers.tables = tables
    for info in COMMANDS:
        subparsers.register(info)
        if not lazy:
            subparsers.complete(info.name)
    return parser


def _complete_subparser(sub: argparse.ArgumentParser, info: CommandInfo, tables: Tables) -> None:
    command = info.load()
    sub.description = command.description or info.help
    if command.examples:  # two or three examples end every subcommand's --help
        sub.epilog = examples_epilog(command.examples)
    command.add_arguments(sub)
    if info.judges:
        add_judging_flags(sub)
    for each in _parsers_under(sub):  # its own actions' parsers too (escape's)
        add_global_flags(each, tables, hidden=True, pointer=global_pointer(PROG))
    sub.set_defaults(handler=command)


def _parsers_under(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parser and every subcommand parser below it."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found += _parsers_under(child)
    return found


class _LazySubcommands(Subcommands):
    """The subcommands' action: each is registered by its name and help line (a choice, and a line
    of ``--help``), and gets its parser when completed: at once for the whole command line, when
    argparse meets its name for a run, so a run builds the one parser it needs (each costs
    argparse's set-up and its message catalogue's look-ups)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: Registered subcommands not completed yet (their entry among the choices holds None).
        self.pending: dict[str, CommandInfo] = {}
        self.tables = Tables()

    def register(self, info: CommandInfo) -> None:
        self._choices_actions.append(self._ChoicesPseudoAction(info.name, (), info.help))
        self._name_parser_map[info.name] = None
        self.pending[info.name] = info

    def complete(self, name: str) -> None:
        """The registered subcommand's parser, in its place among the choices, with its flags."""
        info = self.pending.pop(name)
        sub = self._name_parser_map[name] = self._parser_class(
            prog=f"{PROG} {name}", description=info.help, formatter_class=HelpFormatter)
        sub.add_argument("--version", action="version", version=VERSION, help="print the version and exit")
        _complete_subparser(sub, info, self.tables)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: Optional[str] = None) -> None:
        name = values[0] if isinstance(values, Sequence) and values else None
        if isinstance(name, str) and name in self.pending:
            self.complete(name)
        super().__call__(parser, namespace, values, option_string)


def judging() -> tuple[str, ...]:
    """The subcommands that judge objects: ``--fail-on`` and ``-o junit`` go with these only."""
    return tuple(info.name for info in COMMANDS if info.judges)
