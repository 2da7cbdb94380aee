"""The connection flags: one table of kubectl's flags that say which cluster and who, and the
``ConnectionOptions`` a run reads them into.

``CONNECTION_FLAGS`` is the one statement of each flag: its spellings, its value (a string, a switch,
or a repeatable list), whether it is a secret (never echoed) or an HTTP header value, which kubeconfig
setting it replaces, and what completion offers for it. The parser (``_commands.flags``), ``ConnectionOptions``
and its overrides (``_sources.kubeconfig``), the redaction of typed secrets and completion (``_cli.complete``)
derive from it. And the one kubeconfig finder (``kubeconfig_paths``), which runs and completion share.
Light on purpose: ``--help`` and completion read it, and it imports nothing of the client, nor
the file and YAML readers before a kubeconfig is read.
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from kubectl_kvdtype._kits.records import field, fields, record_type
from kubectl_kvdtype._kits.status import KvdtypeError

if TYPE_CHECKING:
    from kubectl_kvdtype._kits import files as _files

#: ``ConnectionFlag.role``: what a flag says of a run.
OVERRIDES, SELECTS, HOW_IT_RUNS = "overrides", "selects", "how"

#: ``ConnectionFlag.value``: one string, a switch (no value; kubectl's ``=true``/``=false`` too), or a
#: string each time it is given (repeatable).
VALUE = "value"
SWITCH = "switch"
REPEATED = "repeated"


@record_type(frozen=True)
class ConnectionFlag:
    """One connection flag."""

    #: Its spellings, the long one last (``("-s", "--server")``).
    names: tuple[str, ...]
    #: Where the parsed command line keeps it (argparse's ``dest``).
    dest: str
    help: str
    metavar: Optional[str] = None
    value: str = VALUE
    #: Never shown in any output: redacted from messages, kept out of reprs.
    secret: bool = False
    #: Its value becomes an HTTP header value (``Authorization``, ``Impersonate-*``): a line break is refused.
    header: bool = False
    #: The field of ``ConnectionOptions`` it fills (default: ``dest``); None: read by no run.
    option: Optional[str] = ""
    #: The kubeconfig setting it replaces, as ``("cluster" | "user", key)``; None: it selects, or
    #: its rule is written out in ``_sources.kubeconfig`` (``--server``, the CA and TLS flags).
    replaces: Optional[tuple[str, str]] = None
    #: A path: made absolute against the working directory before it replaces the kubeconfig's.
    path: bool = False
    #: What completion offers (``_cli.complete``: ``clusters``, ``users``, ``contexts``, ``files``); None: nothing.
    completes: Optional[str] = None
    #: How its value is checked, as kubectl checks it (a name of ``_commands.flags.VALUE_FORMS``); "": any string.
    form: str = ""
    #: Why it has no meaning here: given with any value but ``idle``, the run is refused in this sentence.
    refused: Optional[str] = None
    #: The values that ask nothing of kubectl either (its default), accepted where ``refused`` is set.
    idle: tuple[str, ...] = ()
    #: What it says of a run: ``OVERRIDES`` (which cluster or who), ``SELECTS`` (only which file or
    #: context to read) or ``HOW_IT_RUNS`` (what it logs, what a warning does, kubectl's preferences).
    #: Only an overriding flag makes a refused kubeconfig a usage error.
    role: str = OVERRIDES

    @property
    def flag(self) -> str:
        """The long spelling, as messages name it."""
        return self.names[-1]

    @property
    def field(self) -> Optional[str]:
        return self.dest if self.option == "" else self.option

    @property
    def default(self) -> Any:
        return [] if self.value == REPEATED else False if self.value == SWITCH else None


#: Every connection flag, in the order ``--help`` lists them.
CONNECTION_FLAGS: tuple[ConnectionFlag, ...] = (
    ConnectionFlag(("--kubeconfig",), "kubeconfig", "path to the kubeconfig file", metavar="PATH", completes="files",
                   role=SELECTS),
    ConnectionFlag(("--context",), "context", "the kubeconfig context to use", completes="contexts", role=SELECTS),
    ConnectionFlag(("--cluster",), "cluster", "the kubeconfig cluster to use (instead of the context's)",
                   completes="clusters"),
    ConnectionFlag(("--user",), "user", "the kubeconfig user to use (instead of the context's)", completes="users"),
    ConnectionFlag(("-s", "--server"), "server", "the address of the API server", metavar="URL"),
    ConnectionFlag(("--token",), "token", "bearer token for the API server (never shown in any output)",
                   metavar="TOKEN", secret=True, header=True, replaces=("user", "token")),
    ConnectionFlag(("--certificate-authority",), "certificate_authority",
                   "a CA certificate file to verify the API server with", metavar="PATH", completes="files"),
    ConnectionFlag(("--client-certificate",), "client_certificate", "client certificate file for TLS",
                   metavar="PATH", replaces=("user", "client-certificate"), path=True, completes="files"),
    ConnectionFlag(("--client-key",), "client_key", "client key file for TLS", metavar="PATH",
                   replaces=("user", "client-key"), path=True, completes="files"),
    ConnectionFlag(("--insecure-skip-tls-verify",), "insecure_skip_tls_verify",
                   "do not verify the API server's certificate (insecure)", value=SWITCH),
    ConnectionFlag(("--tls-server-name",), "tls_server_name",
                   "server name for the API server's certificate and SNI (default: the server's host)",
                   metavar="NAME"),
    ConnectionFlag(("--as",), "as_user", "impersonate this user", metavar="USER", header=True,
                   option="impersonate", replaces=("user", "as")),
    ConnectionFlag(("--as-group",), "as_group", "impersonate this group (repeatable; needs --as)", metavar="GROUP",
                   value=REPEATED, header=True, option="impersonate_groups", replaces=("user", "as-groups")),
    ConnectionFlag(("--as-uid",), "as_uid", "impersonate this UID (needs --as)", metavar="UID", header=True,
                   option="impersonate_uid", replaces=("user", "as-uid")),
    ConnectionFlag(("--username",), "username", "username for basic authentication", metavar="USER",
                   replaces=("user", "username")),
    ConnectionFlag(("--password",), "password", "password for basic authentication (never shown in any output)",
                   metavar="PASSWORD", secret=True, replaces=("user", "password")),
    ConnectionFlag(("--as-user-extra",), "as_user_extra", "impersonate with this user extra, KEY=VALUE (repeatable: "
                   "a key given again adds a value; merged into the user's as-user-extra, key by key; needs --as)",
                   metavar="KEY=VALUE", value=REPEATED, header=True, option="impersonate_extra", form="extra"),
    ConnectionFlag(("--proxy-url",), "proxy_url", "the proxy to reach the API server through (http, https or socks5; "
                   "replaces the cluster's proxy-url)", metavar="URL", replaces=("cluster", "proxy-url"),
                   form="proxy-url"),
    ConnectionFlag(("--disable-compression",), "disable_compression", "do not ask the API server to compress its "
                   "answers (replaces the cluster's disable-compression)", value=SWITCH,
                   replaces=("cluster", "disable-compression")),
    ConnectionFlag(("--warnings-as-errors",), "warnings_as_errors", "a warning from the API server ends the run with "
                   "exit 3", value=SWITCH, role=HOW_IT_RUNS),
    ConnectionFlag(("--kuberc",), "kuberc", "kubectl's kuberc file, for its credential plugin policy (default: "
                   "KUBERC, else ~/.kube/kuberc)", metavar="PATH", completes="files", role=HOW_IT_RUNS),
    ConnectionFlag(("-v", "--v"), "verbosity", "kubectl's log level: from 6, each request's method, URL, status and "
                   "time on stderr (credentials never shown)", metavar="LEVEL", form="level",
                   role=HOW_IT_RUNS),
    ConnectionFlag(("--cache-dir",), "cache_dir", "accepted for kubectl compatibility; unused: the plugin keeps no "
                   "cache", metavar="DIR", option=None, completes="files"),
    ConnectionFlag(("--match-server-version",), "match_server_version", "refused: kubectl compares the server's "
                   "version with its own", value=SWITCH, option=None,
                   refused="cannot be honoured: kubectl compares the server's version with its own, and the plugin "
                           "is not built for one Kubernetes version (it reads the versions each kind is served at)"),
    ConnectionFlag(("--profile",), "profile", "refused but for none: kubectl's profiles are of its own Go runtime",
                   metavar="NAME", option=None, form="profile", idle=("none",),
                   refused="cannot be honoured: its profiles (cpu, heap...) are of kubectl's own Go runtime, which "
                           "does not run the plugin"),
    ConnectionFlag(("--profile-output",), "profile_output", "accepted for kubectl compatibility; unused: it names "
                   "--profile's file", metavar="PATH", option=None, completes="files"),
    ConnectionFlag(("--vmodule",), "vmodule", "accepted for kubectl compatibility (checked as kubectl checks it); "
                   "unused: it sets the log level of kubectl's own source files", metavar="PATTERN=N", option=None,
                   form="vmodule"),
    ConnectionFlag(("--log-flush-frequency",), "log_flush_frequency", "accepted for kubectl compatibility (checked "
                   "as kubectl checks it); unused: the plugin writes each log line at once", metavar="DURATION",
                   option=None, form="flush"),
)
#: The flags that only choose what to read (which file, which context), not what to override: their rows'.
SELECTING = tuple(flag.dest for flag in CONNECTION_FLAGS if flag.role == SELECTS)


@record_type(frozen=True)
class ConnectionOptions:
    """The kubectl-style flags that say which cluster and who; each overrides the kubeconfig's
    setting the way kubectl's does (``_sources.kubeconfig._override_cluster``, ``_override_user``). One field
    per row of ``CONNECTION_FLAGS`` (``option``), and the request timeout; a test ties them."""

    kubeconfig: Optional[str] = None
    context: Optional[str] = None
    request_timeout: Optional[float] = None
    impersonate: Optional[str] = None
    cluster: Optional[str] = None
    user: Optional[str] = None
    server: Optional[str] = None
    token: Optional[str] = field(default=None, repr=False)
    certificate_authority: Optional[str] = None
    client_certificate: Optional[str] = None
    client_key: Optional[str] = None
    insecure_skip_tls_verify: bool = False
    tls_server_name: Optional[str] = None
    impersonate_groups: tuple[str, ...] = ()
    impersonate_uid: Optional[str] = None
    username: Optional[str] = None
    password: Optional[str] = field(default=None, repr=False)
    #: ``--as-user-extra``'s ``KEY=VALUE`` words, in the order given (``_sources.kubeconfig`` merges them).
    impersonate_extra: tuple[str, ...] = ()
    proxy_url: Optional[str] = None
    disable_compression: bool = False
    warnings_as_errors: bool = False
    kuberc: Optional[str] = None
    #: kubectl's ``-v``: 6 and above log each request (``_sources.requestlog``).
    verbosity: int = 0
    #: The table the options were read by.
    table: tuple[ConnectionFlag, ...] = field(default=CONNECTION_FLAGS, repr=False, compare=False)

    @classmethod
    def from_values(cls, value: Callable[[str], Any], request_timeout: Optional[float],
                    table: Sequence[ConnectionFlag] = CONNECTION_FLAGS) -> "ConnectionOptions":
        """From each flag's value (``value(dest)``; None: not given), by the table; two flags filling
        one field (a second spelling) give it the first value given."""
        known = {f.name for f in fields(cls)}
        given: dict[str, Any] = {}
        for flag in table:
            if flag.field is None or flag.field not in known:
                continue
            raw = value(flag.dest)
            typed = tuple(raw or ()) if flag.value == REPEATED else bool(raw) if flag.value == SWITCH else raw
            if typed is not None:  # not given: the field's own default (``verbosity`` 0)
                given[flag.field] = given.get(flag.field) or typed
        return cls(request_timeout=request_timeout, table=tuple(table), **given)

    @property
    def overrides(self) -> bool:
        """Whether any flag overrides the kubeconfig (then a refusal is a usage error)."""
        return any(getattr(self, flag.field, None) for flag in self.table
                   if flag.field is not None and flag.role == OVERRIDES)

    def replaced(self, section: str) -> dict[str, Any]:
        """The kubeconfig ``section``'s settings (``cluster``, ``user``) that flags replace one for one."""
        settings: dict[str, Any] = {}
        for flag in self.table:
            if flag.replaces is None or flag.replaces[0] != section or flag.field is None:
                continue
            value = getattr(self, flag.field, None)
            if flag.path and value:
                value = os.path.abspath(os.path.expanduser(value))
            if value:
                settings[flag.replaces[1]] = list(value) if isinstance(value, tuple) else value
        return settings


# --- The kubeconfig's files, found as kubectl finds them --------------------------------------

#: A real kubeconfig holds a few kB per cluster; a bigger one than this is a mistake or an attack,
#: refused at once instead of parsed for minutes (``kubeconfig_rule``).
KUBECONFIG_MAX_MB = 64
#: Seconds a kubeconfig FIFO may take where no request timeout is at hand (the default one).
PIPE_WAIT = 30.0


@functools.cache
def kubeconfig_rule() -> _files.FileRule:
    """How a kubeconfig is read: a FIFO as kubectl reads one (``--kubeconfig <(vault read ...)``),
    once for the process, within the request timeout; at most ``KUBECONFIG_MAX_MB``. Made on first
    use: the file reader is imported by what reads a kubeconfig, not by ``--help``."""
    from kubectl_kvdtype._kits import files as _files

    return _files.FileRule("a kubeconfig file", KUBECONFIG_MAX_MB << 20,
                           "the most read of one kubeconfig (a real one holds a few kB per cluster)",
                           pipes=_files.READ, remember=True)


def _kubeconfig_file(path: str) -> bool:
    """Whether ``path`` is one kubectl would read as a kubeconfig: a file, or a FIFO."""
    from kubectl_kvdtype._kits import files as _files

    return os.path.isfile(path) or _files.is_pipe(path)


def kubeconfig_paths(explicit: Optional[str], environ: Any) -> list[str]:
    """--kubeconfig, else the KUBECONFIG list (read now, not at import), else ~/.kube/config."""
    if explicit:
        if not os.path.exists(explicit):
            raise KvdtypeError(f"the kubeconfig {explicit} does not exist")
        return [explicit]
    listed = [p for p in environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    if listed:
        existing = [os.path.expanduser(p) for p in listed if _kubeconfig_file(os.path.expanduser(p))]
        if not existing:
            raise KvdtypeError(f"none of the files in KUBECONFIG exist ({environ['KUBECONFIG']})")
        return existing
    home = os.path.join(os.path.expanduser(environ.get("HOME") or "~"), ".kube", "config")
    return [home] if os.path.isfile(home) else []


def read_kubeconfig(path: str, wait: Optional[float] = None) -> dict:
    """One kubeconfig file as a mapping (an empty file: empty); anything else is said in one
    sentence. ``wait``: the most seconds a FIFO may take to be written (None: no limit)."""
    from kubectl_kvdtype._kits import blockyaml as _blockyaml
    from kubectl_kvdtype._kits import bounded as _bounded
    from kubectl_kvdtype._kits import files as _files

    try:
        text = _files.read_text(path, kubeconfig_rule(), wait)
    except _files.Unreadable as error:
        raise KvdtypeError(f"the kubeconfig {path} {error.predicate}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise KvdtypeError(f"cannot read the kubeconfig {path}: {getattr(error, 'strerror', None) or error}") from None
    # A JSON one, or the plain block YAML kubectl writes, as YAML reads them, without importing PyYAML.
    mapping = _bounded.loads_as_yaml(text)
    if mapping is None:
        mapping = _blockyaml.loads_block_mapping(text)
    return mapping if mapping is not None else _yaml_kubeconfig(path, text)


def _yaml_kubeconfig(path: str, text: str) -> dict:
    """``read_kubeconfig`` of a kubeconfig's text by the YAML reader (bounded)."""
    import yaml

    from kubectl_kvdtype._sources import yamlread as _yamlread

    try:
        documents = _yamlread.load_all(text)  # bounded (depth, aliases), and ~3x faster than yaml.safe_load
    except yaml.YAMLError:
        raise KvdtypeError(f"the kubeconfig {path} is not valid YAML") from None
    except ValueError as error:  # nested too deep, excessive aliasing
        raise KvdtypeError(f"the kubeconfig {path} cannot be read: {error}") from None
    if len(documents) > 1:  # yaml.safe_load's refusal, as kubectl's loader reads one document
        raise KvdtypeError(f"the kubeconfig {path} is not valid YAML (it holds {len(documents)} documents)")
    document = documents[0] if documents else None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise KvdtypeError(f"the kubeconfig {path} is not a kubeconfig (expected a mapping)")
    return document


def kubeconfig_names(explicit: Optional[str], environ: Any, section: str,
                     wait: Optional[float] = PIPE_WAIT) -> list[str]:
    """The names of a section's entries (``contexts``, ``clusters``, ``users``) in the kubeconfig's
    files, in file order, each once (the first file to name one wins, as kubectl merges them)."""
    names: dict[str, None] = {}
    for path in kubeconfig_paths(explicit, environ):
        entries = read_kubeconfig(path, wait).get(section)
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                names.setdefault(entry["name"])
    return list(names)
