"""What every subcommand is: a small class with ``run(context) -> Report`` (pip's pattern).

``Context`` carries the parsed flags (``options``: each subcommand module builds its own typed
options from it at its boundary), the shared flags typed once (``CommonOptions``), the environment,
and the object ``Source``, built on first use: the live cluster (which imports the kubernetes
client) or, with ``-f``, the manifests.
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Optional, Sequence

from kubectl_kvdtype._kits import codes as _codes
from kubectl_kvdtype._kits.env import Environment
from kubectl_kvdtype._kits.records import field, record_type
from kubectl_kvdtype._kits.status import KvdtypeError, UsageError
from kubectl_kvdtype._output.render import FORMATS
from kubectl_kvdtype._sources.connection import CONNECTION_FLAGS, ConnectionFlag, ConnectionOptions

if TYPE_CHECKING:  # a run imports them with what builds a report or opens a source
    from kubectl_kvdtype._kits.report import Report
    from kubectl_kvdtype._sources.kinds import Source, WritableSource


def connection_of(flags: argparse.Namespace, table: Sequence[ConnectionFlag] = CONNECTION_FLAGS) -> ConnectionOptions:
    """The connection flags of the parsed command line, by the table (a flag missing from ``flags``
    counts as not given: a hand-built namespace, as completion's)."""
    return ConnectionOptions.from_values(lambda dest: getattr(flags, dest, None),
                                         getattr(flags, "request_timeout", None), table)


@record_type(frozen=True)
class CommonOptions:
    """The flags every subcommand shares, typed, read once from the parsed command line by the
    command-line layer (``_cli``): what ``Context``, ``confirm`` and the rendering read, so that no
    module below the subcommands reads the namespace (black's ``Mode``)."""

    command: str = ""
    #: -f/--filename: empty reads the live cluster.
    filename: tuple[str, ...] = ()
    namespace: Optional[str] = None
    all_namespaces: bool = False
    system_namespace: str = ""
    #: -o: a row of ``FORMATS`` (its first, the default, unless given).
    output: str = FORMATS[0].name
    no_headers: bool = False
    exit_zero: bool = False
    ignore: tuple[str, ...] = ()
    #: --fail-on, a flag of the judging subcommands only: None where the subcommand has none.
    fail_on: Optional[str] = None
    #: --yes, a flag of every subcommand that writes: False where it has none.
    yes: bool = False
    #: --apply, the flag of the writes that plan by default (escape rebind and restore, find-flags
    #: --fix): the command line asking for the write. False where the subcommand has none.
    apply: bool = False
    connection: ConnectionOptions = field(default_factory=ConnectionOptions)

    @classmethod
    def of(cls, flags: argparse.Namespace) -> "CommonOptions":
        """From the parsed command line: a global flag it lacks is an error, never a default."""
        return cls(command=flags.command, filename=tuple(flags.filename or ()), namespace=flags.namespace,
                   all_namespaces=bool(flags.all_namespaces), system_namespace=flags.system_namespace,
                   output=flags.output, no_headers=bool(flags.no_headers), exit_zero=bool(flags.exit_zero),
                   ignore=tuple(flags.ignore or ()), fail_on=getattr(flags, "fail_on", None),
                   yes=bool(getattr(flags, "yes", False)), apply=bool(getattr(flags, "apply", False)),
                   connection=connection_of(flags))


@record_type
class Context:
    """Everything a subcommand may use; it prints nothing and exits nowhere."""

    #: The parsed command line, read only by the subcommand modules, each into its own typed options.
    options: argparse.Namespace
    #: The shared flags, typed (``CommonOptions.of(options)``, built by the command-line layer).
    common: CommonOptions
    env: Environment = field(default_factory=Environment)
    #: When the run began (``time.monotonic()``): a ``--wait`` is counted from it, so that every
    #: context of a fleet run shares one deadline, however late it starts.
    started: float = field(default_factory=time.monotonic)
    _source: Optional[Source] = None
    #: The same object as ``_source`` when that is the live cluster, the one source that can write.
    _writable: Optional[WritableSource] = None

    @property
    def offline(self) -> bool:
        return bool(self.common.filename)

    @property
    def source(self) -> Source:
        if self._source is None:
            self._source = self._open_source()
        return self._source

    @property
    def writable_source(self) -> WritableSource:
        """``source`` for a write: only the live cluster is a ``WritableSource``. Subcommands that write
        refuse ``-f`` with their own message before they get here; manifests are never written."""
        opened = self.source  # opens it if no read came first; only the live cluster sets ``_writable``
        if self._writable is None or opened is not self._writable:
            raise UsageError("objects read with -f/--filename are never written (drop -f to write to a cluster)")
        return self._writable

    def _open_source(self) -> Source:
        if self.offline:
            from kubectl_kvdtype._sources.manifests import ManifestSource

            return ManifestSource.from_paths(list(self.common.filename), self.env.stdin, self.env.environ)
        from kubectl_kvdtype._sources.kubeconfig import resolve

        environ = dict(self.env.environ)
        resolved = resolve(self.common.connection, environ)  # a refused kubeconfig ends the run here...
        from kubectl_kvdtype._sources.cluster import ClusterSource  # ...before the client stack is imported
        from kubectl_kvdtype._sources.connection import kubeconfig_paths
        from kubectl_kvdtype._sources.requestlog import config_loaded

        if not resolved.in_cluster:  # kubectl -v=6's first line, for each file read
            config_loaded(kubeconfig_paths(self.common.connection.kubeconfig, environ),
                          self.common.connection.verbosity, self.env.stderr)

        self._writable = ClusterSource(self.common.connection, environ=environ, resolved=resolved,
                                       warned=self.env.warn, log=self.env.stderr)
        return self._writable

    @property
    def namespace(self) -> Optional[str]:
        """The namespace in scope; None means all namespaces (-A, or a whole dump offline)."""
        if self.common.all_namespaces:
            return None
        return self.common.namespace or self.source.default_namespace()

    @property
    def system_namespace(self) -> str:
        return self.common.system_namespace

    @property
    def scope(self) -> str:
        """Where the run looked, for every empty result: "in namespace team-a", "in any namespace",
        "in dump.yaml" (kubectl: "No resources found in default namespace.")."""
        namespace = self.namespace
        if self.offline:
            files = ", ".join("standard input" if f == "-" else f for f in self.common.filename)
            where = f"in {files}" + (f", namespace {namespace}" if namespace else "")
            empty = getattr(self._source, "empty_lists", [])
            if empty and len(empty) == len(self.common.filename):
                return f"{where} (a List with no items)"
            return where + (f" ({', '.join(empty)}: a List with no items)" if empty else "")
        return f"in namespace {namespace}" if namespace else "in any namespace"

    def annotate(self, report: Report) -> None:
        """What every report gains from the run: the severity that fails it (``--fail-on``), the
        source's own findings (an object read twice from manifests), and the scope named in an
        empty result."""
        if self.common.fail_on is not None:
            report.fail_on = self.common.fail_on
        if report.text is not None or self._source is None:
            return  # a text result, or nothing was read
        report.findings[:0] = getattr(self._source, "findings", [])
        if report.items:
            return
        scope = self.scope
        report.empty_message = f"{report.empty_message.rstrip('.')} {scope}."
        report.summary["scope"] = scope
        report.lead = f"{scope[0].upper()}{scope[1:]}: "


class Command:
    """A subcommand: its name, its own flags, and ``run``. Its one-line help is the registry's
    (``_cli.registry.COMMANDS``, so that ``--help`` imports no subcommand); its finding codes are the
    codes registry's (``_kits.codes``)."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    #: Two or three (comment, command line) pairs that end its ``--help``.
    examples: ClassVar[tuple[tuple[str, str], ...]] = ()
    #: Finding codes this subcommand can report (``--ignore`` accepts these): set from ``_kits.codes``.
    codes: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.codes = _codes.codes_of(cls.name)

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Flags of this subcommand only; the global flags are added for it."""

    def run(self, context: Context) -> Report:
        raise NotImplementedError


#: What the help of every ``--apply`` says of the one consent rule (``confirm``).
APPLY_CONSENT = "without a terminal, --apply is the consent: nothing is asked"
#: What the help of ``--yes`` says where the action itself is the write (escape off and on).
YES_NEEDED = ("do not ask for confirmation; without a terminal it is needed: the action is the write, "
              "cluster-wide, with no plan first and no --apply")


def confirm(context: Context, question: str, *, show: Optional[Callable[[], None]] = None) -> None:
    """The one rule before every write this tool asks about (escape rebind and restore, find-flags
    --fix, escape off and on): ``--yes`` goes on without asking. On a terminal, ``show`` says what
    is about to be written, then ``question [y/N]`` is asked on stderr, and any answer but y/yes
    changes nothing (exit 3). Without a terminal nothing can be asked, and a command line that
    asked for the write goes on: ``--apply``, which a write that plans by default takes to carry
    its plan out (as ``kubectl apply`` or ``kubectl delete`` ask nothing of a script). ``escape
    off`` and ``on`` have no plan to look at first and no ``--apply``: the action's name is the
    whole command, and it recreates every pool-attached replica in the cluster, so without a
    terminal they are refused (exit 2) unless ``--yes`` says the script means it."""
    env = context.env
    if context.common.yes:
        return
    if not env.stdin_isatty:
        if context.common.apply:
            return
        raise UsageError("refusing to write without confirmation: stdin is not a terminal, so pass --yes "
                         "to confirm (nothing was changed)")
    if show is not None:
        show()
    answer = env.ask(f"{question} [y/N]:").lower()
    if answer not in ("y", "yes"):
        raise KvdtypeError("not confirmed; nothing was changed")
