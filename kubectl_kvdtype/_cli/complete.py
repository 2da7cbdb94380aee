"""The completion engine behind ``completion``'s scripts and ``kubectl_complete-kvdtype``.

The shell scripts and kubectl (>= 1.26, through ``kubectl_complete-kvdtype``) ask the plugin itself
what may come next: ``kubectl-kvdtype __complete ARGS... PARTIAL`` prints one candidate per line
(``candidate<TAB>description``), then cobra's directive line (``:4`` = no file completion, ``:0`` =
let the shell complete file names). Subcommands and flags are read from ``build_parser()``, so a
subcommand is completed as soon as it is registered; finding codes come from the registry
(``_kits.codes``); names of ModelDeployments, Bindings and namespaces come from the cluster when it
answers within a short timeout (``KUBECTL_KVDTYPE_COMPLETION_TIMEOUT`` seconds, default 2), and are
simply left out otherwise.

An argument names what it completes by its ``dest``/``metavar`` (``namespace``, ``deployment``,
``binding``, ``context``, ``kubeconfig``/``PATH``, ``ignore``) or explicitly::

    parser.add_argument("deployment").completer = "modeldeployments"

(one of ``namespaces``, ``modeldeployments``, ``kvcachepoolbindings``, ``contexts``, ``clusters``,
``users``, ``codes``, ``files``). Names from the cluster are read with every connection flag typed so
far (``--server``, ``--token``, ``--as``...), as the command itself would. Nothing here imports the
kubernetes client unless a cluster name is being completed. A layer of the command line, beside
``_cli.registry``: the subcommand ``completion`` only prints the scripts.
"""

from __future__ import annotations

import argparse
import threading
from typing import Optional, Sequence

from kubectl_kvdtype._cli.registry import build_parser, judging
from kubectl_kvdtype._commands.command import CommonOptions, Context, connection_of
from kubectl_kvdtype._kits import codes as _codes
from kubectl_kvdtype._kits import settings as _settings
from kubectl_kvdtype._kits import threads
from kubectl_kvdtype._kits.env import Environment
from kubectl_kvdtype._kits.status import KvdtypeError
from kubectl_kvdtype._output.format import Format
from kubectl_kvdtype._output.render import FORMATS
from kubectl_kvdtype._sources import model as _model
from kubectl_kvdtype._sources.connection import CONNECTION_FLAGS, REPEATED, SWITCH, ConnectionFlag, kubeconfig_names
from kubectl_kvdtype._sources.kinds import BINDING, DEPLOYMENT, Kind

#: cobra's ShellCompDirective values, as kubectl's own completion reads them.
DIRECTIVE_DEFAULT = 0  # the shell may complete file names
DIRECTIVE_NO_FILES = 4  # ShellCompDirectiveNoFileComp
TIMEOUT_VARIABLE = _settings.COMPLETION_TIMEOUT.name
DEFAULT_TIMEOUT: float = _settings.COMPLETION_TIMEOUT.default
#: Listed only to complete -n; no subcommand reads Namespaces.
NAMESPACE = Kind("Namespace", "", ("v1",), "namespaces", namespaced=False)


# --- The engine -------------------------------------------------------------------------------

def complete(args: Sequence[str], env: Optional[Environment] = None, formats: Sequence[Format] = FORMATS,
             connection: Sequence[ConnectionFlag] = CONNECTION_FLAGS) -> int:
    """Print the candidates for the last of ``args`` (the word being typed) and the directive
    (``formats``: the table ``-o`` values come from; ``connection``: the connection flags' table)."""
    env = env or Environment()
    args = list(args) or [""]
    words, current = args[:-1], args[-1]
    try:
        candidates, directive = _candidates(words, current, env, formats, connection)
    except Exception:  # completion must never print a traceback into the user's prompt
        candidates, directive = [], DIRECTIVE_NO_FILES
    lines = [f"{value}\t{' '.join(text.split())}" if text else value for value, text in candidates]
    env.stdout.write("".join(line + "\n" for line in lines) + f":{directive}\n")
    env.stdout.flush()
    return 0


class _Scan:
    """What the words typed so far say: the (nested) subcommand, positionals, flag values, and
    whether the last word is a flag still waiting for its value."""

    def __init__(self, parser: argparse.ArgumentParser, words: Sequence[str], formats: Sequence[Format],
                 connection: Sequence[ConnectionFlag]) -> None:
        self.root = parser
        self.formats = formats
        self.connection = connection
        self.parser = parser  # the innermost (sub)parser named so far
        self.commands: list[str] = []
        self.positionals: list[str] = []  # of the innermost parser
        self.values: dict[str, str] = {}  # dest -> last value given
        self.flags: set[str] = set()  # dests of flags given without a value
        self.pending: Optional[argparse.Action] = None
        after_dashes = False
        for word in words:
            if self.pending is not None:
                self.values[self.pending.dest] = word
                self.pending = None
                continue
            if word == "--":
                after_dashes = True
                continue
            if word.startswith("-") and word != "-" and not after_dashes:
                name, has_value, value = word.partition("=")
                action = _option(self.parser, name)
                if action is None:
                    continue
                if not _takes_value(action):
                    self.flags.add(action.dest)
                elif has_value:
                    self.values[action.dest] = value
                elif name in self.parser._option_string_actions:
                    if action.nargs != "?":  # an optional value (--wait [DURATION]) is not awaited
                        self.pending = action
                else:  # -nteam-a: a short flag with its value attached
                    self.values[action.dest] = name[2:]
                continue
            subcommands = _subcommands(self.parser)
            if word in subcommands and not self.positionals:
                self.parser = subcommands[word]
                self.commands.append(word)
            else:
                self.positionals.append(word)

    def value(self, *dests: str) -> Optional[str]:
        for dest in dests:
            if dest in self.values:
                return self.values[dest]
        return None


def _candidates(words: Sequence[str], current: str, env: Environment, formats: Sequence[Format],
                connection: Sequence[ConnectionFlag]) -> tuple[list[tuple[str, str]], int]:
    scan = _Scan(build_parser(formats=formats, connection=connection), words, formats, connection)
    if scan.pending is not None:
        return _values(scan.pending, current, scan, env, prefix="")
    if current.startswith("-") and "=" in current:
        name, _, partial = current.partition("=")
        action = _option(scan.parser, name)
        if action is None or not _takes_value(action):
            return [], DIRECTIVE_NO_FILES
        return _values(action, partial, scan, env, prefix=name + "=")
    if current.startswith("-"):
        return _flags(scan.parser, scan.root, current), DIRECTIVE_NO_FILES
    subcommands = _subcommands(scan.parser)
    if subcommands and not scan.positionals:
        return [(name, _help_of(scan.parser, name)) for name in subcommands if name.startswith(current)], \
            DIRECTIVE_NO_FILES
    positionals = [a for a in scan.parser._actions if not a.option_strings and a.help != argparse.SUPPRESS]
    if len(scan.positionals) < len(positionals):
        return _values(positionals[len(scan.positionals)], current, scan, env, prefix="")
    return [], DIRECTIVE_NO_FILES


def _flags(parser: argparse.ArgumentParser, root: argparse.ArgumentParser, current: str) -> list[tuple[str, str]]:
    """Every spelling of every flag of the parser in use that starts with what is typed: its own,
    then the global flags (hidden from a subcommand's help, listed with the top-level parser's)."""
    shown = [a for a in parser._actions if a.help != argparse.SUPPRESS]
    if parser is not root:
        shown += [a for a in root._actions if getattr(a, "global_flag", False)]
    return [(option, action.help or "") for action in shown for option in action.option_strings
            if option.startswith(current)]


def _values(action: argparse.Action, partial: str, scan: _Scan, env: Environment,
            prefix: str) -> tuple[list[tuple[str, str]], int]:
    what = _what(action)
    typed: set[str] = set()
    if getattr(action, "comma_separated", False):  # --contexts a,b,<TAB>: the next name, not one typed
        before, comma, partial = partial.rpartition(",")
        prefix += before + comma
        typed = set(before.split(","))
    if action.dest == "output":  # the formats the subcommand typed takes, with the flags typed so far
        command = scan.commands[0] if scan.commands else None
        names = [form.name for form in scan.formats
                 if form.taken_by(command, judging(), lambda dest: dest in scan.flags)]
    elif action.choices and not isinstance(getattr(action, "completer", None), str):
        names = [str(choice) for choice in action.choices]
    elif what == "files":
        return [], DIRECTIVE_DEFAULT
    elif what in _KUBECONFIG_SECTIONS:
        names = _kubeconfig_names(scan, env, _KUBECONFIG_SECTIONS[what])
    elif what == "codes":
        names = _codes.known()
    elif what in ("namespaces", "modeldeployments", "kvcachepoolbindings"):
        names = _from_cluster(what, scan, env)
    else:
        return [], DIRECTIVE_NO_FILES
    return [(prefix + name, "") for name in names if name.startswith(partial) and name not in typed], \
        DIRECTIVE_NO_FILES


def _what(action: argparse.Action) -> Optional[str]:
    """What an argument's values are, by its explicit ``completer`` or its dest/metavar."""
    explicit = getattr(action, "completer", None)
    if isinstance(explicit, str):
        return explicit
    words = f"{action.dest} {action.metavar or ''}".lower()
    if action.dest.startswith(("filename", "kubeconfig")) or any(w in words for w in ("path", "file", "dir")):
        return "files"
    if action.dest.startswith("ignore"):
        return "codes"
    if "context" in words:
        return "contexts"
    if "namespace" in words:
        return "namespaces"
    if "deployment" in words:
        return "modeldeployments"
    if "binding" in words:
        return "kvcachepoolbindings"
    return None


_KUBECONFIG_SECTIONS = {"contexts": "contexts", "clusters": "clusters", "users": "users"}


def _kubeconfig_names(scan: _Scan, env: Environment, section: str) -> list[str]:
    """Names of contexts, clusters or users in the kubeconfig files, found as a run finds them
    (``_sources.connection.kubeconfig_paths``; no client); none when they cannot be read."""
    try:
        return kubeconfig_names(scan.value("kubeconfig"), env.environ, section)
    except KvdtypeError:
        return []


def _timeout(env: Environment) -> float:
    """The setting's value; a bad one is the default: completion never prints an error."""
    return float(_settings.value_or_default(env.environ, _settings.COMPLETION_TIMEOUT))


def _from_cluster(what: str, scan: _Scan, env: Environment) -> list[str]:
    """Names from the cluster, or nothing when it does not answer within the timeout."""
    timeout = _timeout(env)
    result: list[str] = []

    def fetch() -> None:
        try:
            result.extend(_cluster_names(what, scan, env, timeout))
        except Exception:  # unreachable, forbidden, no kubeconfig: complete nothing
            pass

    worker = threading.Thread(target=fetch, name="completion", daemon=True)
    threads.start(worker)
    worker.join(timeout)
    return sorted(set(result)) if not worker.is_alive() else []


def _typed(flag: ConnectionFlag, scan: _Scan) -> object:
    """A connection flag's value as typed so far (the last one given; a list's from before and after
    the subcommand)."""
    if flag.value == SWITCH:
        return flag.dest in scan.flags
    if flag.value == REPEATED:
        return [v for v in (scan.value(flag.dest),) if v]
    return scan.value(flag.dest)


def _cluster_names(what: str, scan: _Scan, env: Environment, timeout: float) -> list[str]:
    """The names, read through the same ``Context`` (and so the same ClusterSource) a command gets,
    with every connection flag (``_sources.connection.CONNECTION_FLAGS``) typed so far."""
    options = argparse.Namespace(request_timeout=timeout or None,
                                 **{flag.dest: _typed(flag, scan) for flag in scan.connection})
    common = CommonOptions(all_namespaces="all_namespaces" in scan.flags, namespace=scan.value("namespace"),
                           connection=connection_of(options))
    context = Context(options, common, env)
    source = context.source  # imports the client; a kubeconfig error ends here
    if what == "namespaces":
        try:
            return [_model.name_of(i) for i in source.list(NAMESPACE, None)]
        except Exception:  # may not list namespaces: the ones holding ModelDeployments will do
            return [_model.namespace_of(i) for i in source.list(DEPLOYMENT, None)]
    kind = DEPLOYMENT if what == "modeldeployments" else BINDING
    return [_model.name_of(i) for i in source.list(kind, context.namespace)]


# --- argparse introspection ---------------------------------------------------------------------

def _subparsers(parser: argparse.ArgumentParser) -> Optional[argparse._SubParsersAction]:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = _subparsers(parser)
    return dict(action.choices) if action else {}


def _help_of(parser: argparse.ArgumentParser, name: str) -> str:
    action = _subparsers(parser)
    choices = action._choices_actions if action else []
    return next((choice.help or "" for choice in choices if choice.dest == name), "")


def _option(parser: argparse.ArgumentParser, name: str) -> Optional[argparse.Action]:
    if name in parser._option_string_actions:
        return parser._option_string_actions[name]
    if len(name) > 2 and not name.startswith("--"):  # -nteam-a: a short flag with its value attached
        return parser._option_string_actions.get(name[:2])
    return None


def _takes_value(action: argparse.Action) -> bool:
    return action.nargs != 0
