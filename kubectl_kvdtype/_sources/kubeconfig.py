"""The kubeconfig resolved like kubectl: files merged, the connection flags' overrides applied
(the flags and ``ConnectionOptions`` are ``_sources.connection``'s), in-cluster configuration, what is
refused before any request, and whether the direct transport can serve it (:func:`direct_settings`).

The bottom of the connection's modules (with ``connection``, ``kuberc`` and ``incluster``): it imports
none of the credentials, transports or the kubernetes client, so a kubeconfig refused, a context that
does not exist, end the run before any of them is imported (``client_transport.configure`` hands a
resolved kubeconfig to the client's loader)."""

from __future__ import annotations

import base64
import os
from typing import Any, Iterator, Optional
from urllib.parse import urlsplit

from kubectl_kvdtype._kits import files as _files
from kubectl_kvdtype._kits.records import field, record_type, replace
from kubectl_kvdtype._kits.secrets import HEADER_REFUSAL, breaks_header, without_password
from kubectl_kvdtype._kits.status import (
    KvdtypeError,
    UsageError,
)
from kubectl_kvdtype._sources import incluster as _incluster
from kubectl_kvdtype._sources import kuberc as _kuberc
from kubectl_kvdtype._sources import names as _names
from kubectl_kvdtype._sources import proxy as _proxy
from kubectl_kvdtype._sources.connection import ConnectionOptions, kubeconfig_names, kubeconfig_paths, read_kubeconfig
from kubectl_kvdtype._sources.proxy import Proxy

# --- Kubeconfig, resolved like kubectl -----------------------------------------------------

Headers = list[tuple[str, str]]
_CLUSTER_PATHS = ("certificate-authority",)
_USER_PATHS = ("client-certificate", "client-key", "tokenFile")


@record_type(frozen=True)
class Resolved:
    """A kubeconfig resolved for one run (:func:`resolve`), before the client is imported: the
    context's cluster and user settings, flags applied, or ``in_cluster``."""

    options: ConnectionOptions
    environ: dict = field(repr=False)
    in_cluster: bool = False
    cluster: dict = field(default_factory=dict, repr=False)
    user: dict = field(default_factory=dict, repr=False)
    user_dir: str = ""
    user_name: str = ""
    what: str = ""
    namespace: str = "default"
    impersonation: Headers = field(default_factory=list)

    @property
    def preferences(self) -> _kuberc.Preferences:
        """Where kuberc, whose credential plugin policy an exec plugin must pass, is found."""
        return _kuberc.Preferences(self.options.kuberc, self.environ)

    @property
    def config(self) -> dict:
        """The one-context kubeconfig the client's loader gets (context ``kvdtype``)."""
        return {"clusters": [{"name": "c", "cluster": self.cluster}], "users": [{"name": "u", "user": self.user}],
                "contexts": [{"name": "kvdtype", "context": {"cluster": "c", "user": "u"}}]}


def context_namespace(resolved: Resolved) -> str:
    """The context's namespace, refused (exit 3) when it is no namespace name."""
    _names.check_configured("namespace", resolved.namespace, _names.LABEL, f"the {resolved.what} of the kubeconfig")
    return resolved.namespace


# --- What the standard library can connect with ----------------------------------------------
#
# A kubeconfig whose credentials are a token, basic auth, a client certificate or an exec plugin
# alone, with a CA (or none, or verification off), through a proxy or not, needs nothing of the kubernetes
# client's transport: the direct transport (``_sources.direct``) sends its requests over a socket
# and ``ssl`` (an exec plugin is run by ``_sources.credentials``, as client-go runs it). Anything
# else, or a setting of a type or form the direct transport would have to guess about, goes to the
# client, whose loader reads it (and words its refusal) as it always has. The settings are read as
# the client's loader reads them (``KubeConfigLoader``: a token before basic auth, TLS settings
# only for an https server, ``insecure-skip-tls-verify`` by its truth).

#: The settings the direct transport carries out; a cluster or user with any other goes to the client.
_DIRECT_CLUSTER = frozenset({"server", "certificate-authority", "certificate-authority-data",
                             "insecure-skip-tls-verify", "tls-server-name", "extensions", "disable-compression",
                             "proxy-url"})
#: What a user may set besides its credentials (who to act as, extensions) and stay direct.
_DIRECT_IDENTITY = frozenset({"as", "as-uid", "as-groups", "as-user-extra", "extensions"})
_DIRECT_USER = frozenset({"token", "username", "password", "client-certificate", "client-certificate-data",
                          "client-key", "client-key-data"}) | _DIRECT_IDENTITY
#: An exec plugin's user stays direct when the plugin is its only credential.
_DIRECT_EXEC_USER = frozenset({"exec"}) | _DIRECT_IDENTITY


@record_type(frozen=True)
class DirectSettings:
    """A kubeconfig's connection as the direct transport makes it. ``host``: the server's URL
    without a trailing slash; ``hostname``, ``port``: where to connect; the TLS settings apply to
    an https server only; ``*_data``: a setting's content decoded (PEM for the CA)."""

    host: str
    tls: bool
    hostname: str
    port: int
    authorization: Optional[str] = None
    verify: bool = True
    server_name: Optional[str] = None
    ca_file: Optional[str] = None
    ca_data: Optional[str] = None
    cert_file: Optional[str] = None
    cert_data: Optional[bytes] = None
    key_file: Optional[str] = None
    key_data: Optional[bytes] = None
    #: The user's exec plugin (``users[].user.exec``), the cluster it may be told of and the
    #: directory it runs in, as the client's loader hands them to its provider.
    exec_plugin: Optional[dict] = field(default=None, repr=False)
    exec_cluster: Optional[dict] = field(default=None, repr=False)
    exec_dir: str = ""
    #: The proxy requests go through (``_sources.proxy``: the cluster's proxy-url, else the
    #: environment's, as kubectl's), or None.
    proxy: Optional[Proxy] = None
    exec_user: str = ""
    #: Where kuberc is found, whose credential plugin policy the exec plugin must pass.
    exec_preferences: Optional[_kuberc.Preferences] = field(default=None, repr=False)


def direct_settings(resolved: Resolved) -> Optional[DirectSettings]:
    """The direct transport's settings of ``resolved``, or None where the client must connect."""
    exec_user = "exec" in resolved.user
    if not (set(resolved.cluster) <= _DIRECT_CLUSTER and set(resolved.user) <= (
            _DIRECT_EXEC_USER if exec_user else _DIRECT_USER)):
        return None
    if exec_user and not _plain_exec(resolved.user["exec"]):
        return None
    try:
        settings = _direct(resolved.cluster, resolved.user)
    except (ValueError, TypeError, AttributeError, KeyError):  # bad base64, a non-string setting: the client words it
        return None
    if settings is None:
        return None
    chosen = _proxy.for_server(settings.host, resolved.environ, resolved.cluster.get("proxy-url"))
    settings = replace(settings, proxy=chosen)
    if not exec_user:
        return settings
    return replace(settings, exec_plugin=resolved.user["exec"], exec_cluster=resolved.cluster,
                   exec_dir=resolved.user_dir, exec_user=resolved.user_name, exec_preferences=resolved.preferences)


def _plain_exec(plugin: Any) -> bool:
    """An exec setting the client's provider reads without a doubt: a command and an apiVersion as
    strings, its args strings, its env name and value pairs. Anything else the client's loader
    reads, and words, as before."""
    if not (isinstance(plugin, dict) and isinstance(plugin.get("command"), str) and plugin["command"]
            and isinstance(plugin.get("apiVersion"), str)):
        return False
    args, env = plugin.get("args") or [], plugin.get("env") or []
    return isinstance(args, list) and all(isinstance(a, str) for a in args) and isinstance(env, list) and all(
        isinstance(e, dict) and isinstance(e.get("name"), str) and isinstance(e.get("value"), str) for e in env)


def _direct(cluster: dict, user: dict) -> Optional[DirectSettings]:
    server = cluster["server"]
    parts = urlsplit(server)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username is not None \
            or parts.password is not None or parts.query or parts.fragment:
        return None
    tls = parts.scheme == "https"
    settings = DirectSettings(host=server.rstrip("/"), tls=tls, hostname=parts.hostname,
                              port=parts.port or (443 if tls else 80), authorization=_authorization(user))
    if not tls:
        return settings
    return replace(settings, verify=not cluster.get("insecure-skip-tls-verify"),
                   server_name=cluster.get("tls-server-name") or None,
                   ca_file=_text(cluster.get("certificate-authority")),
                   ca_data=_decoded(cluster.get("certificate-authority-data")).decode("ascii") or None,
                   cert_file=_text(user.get("client-certificate")),
                   cert_data=_decoded(user.get("client-certificate-data")) or None,
                   key_file=_text(user.get("client-key")), key_data=_decoded(user.get("client-key-data")) or None)


def _authorization(user: dict) -> Optional[str]:
    """The client's loader's: a token, else basic auth when both halves are set (latin-1, as urllib3 encodes it)."""
    token = user.get("token")
    if token:
        return f"Bearer {_text(token)}"
    if "username" in user and "password" in user:
        pair = f"{_text(user['username']) or ''}:{_text(user['password']) or ''}".encode("latin-1")
        return "Basic " + base64.b64encode(pair).decode("ascii")
    return None


def _text(value: Any) -> Optional[str]:
    """A setting that must be a string (or absent); anything else is the client's to refuse."""
    if value is None or isinstance(value, str):
        return value
    raise TypeError("not a string")


def _decoded(value: Any) -> bytes:
    """A ``*-data`` setting decoded as the client decodes it (``base64.standard_b64decode``)."""
    return base64.standard_b64decode(_text(value) or "")


def resolve(options: ConnectionOptions, environ: dict) -> Resolved:
    """The kubeconfig of a run, resolved as kubectl resolves it, and refused as kubectl refuses
    it, with no client import (see the module's docstring)."""
    _kuberc.check_switches(options.kuberc, environ)
    paths = kubeconfig_paths(options.kubeconfig, environ)
    if not paths and not options.server:
        if not environ.get("KUBERNETES_SERVICE_HOST"):
            raise KvdtypeError("no kubeconfig found (~/.kube/config, KUBECONFIG, --kubeconfig) and not running "
                               "in a cluster: pass --kubeconfig, or --server")
        return _in_cluster(options, environ)
    documents = [(path, read_kubeconfig(path, options.request_timeout)) for path in paths]
    context_name = options.context or next(
        (d.get("current-context") for _, d in documents if d.get("current-context")), None)
    entry: dict = {}
    if context_name:
        found = _named(documents, "contexts", context_name)
        if found is None:
            raise KvdtypeError(f'the context "{context_name}" does not exist in the kubeconfig ({", ".join(paths)})')
        entry = _mapping(found[1].get("context"))
    elif not (options.server or options.cluster):
        raise KvdtypeError(f"the kubeconfig ({', '.join(paths)}) sets no current context: pass --context or --server")
    cluster_name = options.cluster or entry.get("cluster") or ""
    user_name = options.user or entry.get("user") or ""
    if options.user and _named(documents, "users", options.user) is None:  # exit 3, as an unknown --context
        raise KvdtypeError(f'auth info "{options.user}" does not exist in the kubeconfig ({", ".join(paths)})')
    cluster, _ = _entry(documents, "clusters", cluster_name, "cluster", _CLUSTER_PATHS)
    user, user_dir = _entry(documents, "users", user_name, "user", _USER_PATHS)
    if options.cluster and not options.server and _named(documents, "clusters", options.cluster) is None:
        raise KvdtypeError(f'no server found for cluster "{options.cluster}": the kubeconfig '
                           f'({", ".join(paths)}) has no such cluster')
    cluster, user = _override_cluster(cluster, options), _override_user(_read_token_file(user, user_name), options)
    cluster, user = _inline_pipes(cluster, options.request_timeout), _inline_pipes(user, options.request_timeout)
    refusals = _refusals(cluster_name, cluster, user_name, user)
    if refusals:
        raise (UsageError if options.overrides else KvdtypeError)("; ".join(refusals))
    _refuse_unsendable_headers(user, user_name)
    what = f'context "{context_name}"' if context_name else f"the server {without_password(str(cluster.get('server')))}"
    namespace = entry.get("namespace") or "default"
    return Resolved(options, environ, cluster=cluster, user=user, user_dir=user_dir, user_name=user_name, what=what,
                    namespace=namespace, impersonation=_impersonation(user))


#: A token file: a token is a few kB at most. A FIFO is refused, not waited on (kubectl hangs on
#: one, reading it again at every refresh), and so is a device (``/dev/zero`` never ends).
TOKEN_FILE_RULE = _files.FileRule("a token file", 1 << 20, "the most read of one token file (a token is a few kB)",
                                  reads="kubectl hangs on a FIFO tokenFile too: write the token to a regular file")


def _read_token_file(user: dict, user_name: str = "") -> dict:
    """The user with its ``tokenFile`` read into ``token``, surrounding blanks trimmed as kubectl
    trims them (``echo "$TOKEN" > file`` ends the file with a newline, no header may hold one).
    An inline token wins over the file, as in kubectl; a file that cannot be opened is left to the
    client's own message, one that is no file or too big is refused (exit 3)."""
    path = user.get("tokenFile")
    if user.get("token") or not isinstance(path, str) or not path:
        return user
    try:
        token = _files.read_text(path, TOKEN_FILE_RULE).strip()
    except _files.Unreadable as error:
        raise KvdtypeError(f'the tokenFile {path} of the kubeconfig user "{user_name}" {error.predicate}') from None
    except (OSError, UnicodeDecodeError):
        return user
    trimmed = {key: value for key, value in user.items() if key != "tokenFile"}
    return {**trimmed, "token": token}


#: The user settings sent as HTTP header values.
_HEADER_SETTINGS = ("token", "as", "as-uid", "as-groups", "as-user-extra")


def _refuse_unsendable_headers(user: dict, user_name: str) -> None:
    """A kubeconfig credential or impersonation value no header can carry: one sentence naming
    the setting, never the value (exit 3)."""
    for key in _HEADER_SETTINGS:
        setting = user.get(key)
        if key == "as-user-extra" and isinstance(setting, dict):
            setting = list(setting.values())  # its keys are percent-encoded into the headers' names
        if any(breaks_header(text) for text in _strings(setting)):
            raise KvdtypeError(f'the {key} of the kubeconfig user "{user_name}" holds {HEADER_REFUSAL} '
                               "(the value is not shown)")


def _strings(value: Any) -> Iterator[str]:
    """Every string in a setting: itself, a list's items, a mapping's keys and values (as-user-extra)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _mapping(value: Any) -> dict:
    """A kubeconfig section that should be a mapping; anything else (a hand-edited ``3``) reads as empty."""
    return value if isinstance(value, dict) else {}


def _named(documents: list[tuple[str, dict]], section: str, name: str) -> Optional[tuple[str, dict]]:
    """(file, entry) of the first entry of that name: like kubectl, the first file to set one wins."""
    for path, document in documents:
        for item in _listed(document.get(section)):
            if isinstance(item, dict) and item.get("name") == name:
                return path, item
    return None


def _entry(documents: list[tuple[str, dict]], section: str, name: str, key: str,
           path_keys: tuple[str, ...]) -> tuple[dict, str]:
    """A copy of a cluster's or user's settings, its file paths made absolute against its own
    kubeconfig file (so flags' paths, relative to the working directory, can sit beside them)."""
    found = _named(documents, section, name) if name else None
    if found is None:
        return {}, os.getcwd()
    base = os.path.dirname(os.path.abspath(found[0]))
    settings = dict(_mapping(found[1].get(key)))
    for path_key in path_keys:
        if isinstance(settings.get(path_key), str) and settings[path_key]:
            settings[path_key] = os.path.join(base, os.path.expanduser(settings[path_key]))
    return settings, base


def _override_cluster(cluster: dict, options: ConnectionOptions) -> dict:
    """kubectl's rules: --certificate-authority or --insecure-skip-tls-verify replaces all three of
    the kubeconfig's CA file, CA data and skip setting; --server also drops its tls-server-name."""
    cluster = dict(cluster)
    cluster.update(options.replaced("cluster"))  # each flag with ``replaces`` in the table, one for one
    if options.server:
        cluster["server"] = options.server
    if options.insecure_skip_tls_verify or options.certificate_authority:
        cluster.pop("certificate-authority-data", None)
        cluster.pop("certificate-authority", None)
        cluster["insecure-skip-tls-verify"] = options.insecure_skip_tls_verify
        if options.certificate_authority:
            cluster["certificate-authority"] = os.path.abspath(options.certificate_authority)
    if options.tls_server_name or options.server:
        cluster.pop("tls-server-name", None)
        if options.tls_server_name:
            cluster["tls-server-name"] = options.tls_server_name
    return cluster


def _override_user(user: dict, options: ConnectionOptions) -> dict:
    """Each flag replaces the same setting. A token or basic auth from a flag also sets aside the
    user's exec plugin and auth provider: kubectl sends the flag's credentials, never theirs."""
    user = dict(user)
    user.update(options.replaced("user"))  # each flag with ``replaces`` in the table, one for one
    if options.impersonate_extra:
        user["as-user-extra"] = _extra_merged(user.get("as-user-extra"), options.impersonate_extra)
    if options.token:
        user.pop("tokenFile", None)
    if options.token or options.username or options.password:
        user.pop("exec", None)
        user.pop("auth-provider", None)
    if user.get("username") or user.get("password"):  # the client needs both; kubectl defaults either to ""
        user.setdefault("username", "")
        user.setdefault("password", "")
    return user


def _refusals(cluster_name: str, cluster: dict, user_name: str, user: dict) -> list[str]:
    """What kubectl refuses to run with, in kubectl's words (its kubeconfig validation)."""
    errors = []
    if not cluster.get("server"):
        errors.append(f'no server found for cluster "{cluster_name}"' if cluster_name
                      else "no server found: pass --server")
    if cluster.get("certificate-authority") and cluster.get("certificate-authority-data"):
        errors.append(f"certificate-authority-data and certificate-authority are both specified for {cluster_name}. "
                      "certificate-authority-data will override.")
    errors += _unreadable(cluster, "certificate-authority", "certificate-authority", cluster_name)
    has_ca = cluster.get("certificate-authority") or cluster.get("certificate-authority-data")
    if cluster.get("insecure-skip-tls-verify") and has_ca:
        errors.append("specifying a root certificates file with the insecure flag is not allowed")
    if user.get("client-certificate") or user.get("client-certificate-data"):
        if user.get("client-certificate") and user.get("client-certificate-data"):
            errors.append(f"client-cert-data and client-cert are both specified for {user_name}. "
                          "client-cert-data will override.")
        if user.get("client-key") and user.get("client-key-data"):
            errors.append(f"client-key-data and client-key are both specified for {user_name}; "
                          "client-key-data will override")
        if not (user.get("client-key") or user.get("client-key-data")):
            errors.append(f"client-key-data or client-key must be specified for {user_name} to use the clientCert "
                          "authentication method.")
        errors += _unreadable(user, "client-certificate", "client-cert", user_name)
        errors += _unreadable(user, "client-key", "client-key", user_name)
    methods = (["token"] if user.get("token") else []) + (
        ["basicAuth"] if user.get("username") or user.get("password") else [])
    if len(methods) > 1:
        errors.append(f"more than one authentication method found for {user_name}; "
                      f"found [{' '.join(methods)}], only one is allowed")
    if (user.get("as-uid") or user.get("as-groups") or user.get("as-user-extra")) and not user.get("as"):
        errors.append(f"requesting uid, groups or user-extra for {user_name} without impersonating a user")
    return errors


#: A certificate, key or CA file: a FIFO is read as kubectl reads one (``--certificate-authority
#: <(vault ...)``) and handed to the client as the setting's ``-data``; a device is refused.
CERTIFICATE_RULE = _files.FileRule("a certificate or key file", 8 << 20, "the most read of one certificate or key "
                                   "file", pipes=_files.READ)
#: The file settings a FIFO may stand for, and the setting that carries its content instead.
_FILE_DATA = (("certificate-authority", "certificate-authority-data"),
              ("client-certificate", "client-certificate-data"), ("client-key", "client-key-data"))


def _inline_pipes(settings: dict, wait: Optional[float]) -> dict:
    """``settings`` with each file setting that names a FIFO read into its ``-data`` setting (the
    client opens files itself, and would wait on a FIFO with no limit); the rest unchanged."""
    replaced = dict(settings)
    for key, data_key in _FILE_DATA:
        path = settings.get(key)
        if not isinstance(path, str) or not path or settings.get(data_key) or not _files.is_pipe(path):
            continue
        try:
            content = _files.read_bytes(path, CERTIFICATE_RULE, wait)
        except OSError:
            continue  # said by _unreadable, in kubectl's words
        replaced.pop(key)
        replaced[data_key] = base64.b64encode(content).decode("ascii")
    return replaced


def _unreadable(settings: dict, key: str, label: str, owner: str) -> list[str]:
    path = settings.get(key)
    if not path:
        return []
    try:
        _files.read_bytes(path, CERTIFICATE_RULE, wait=1.0)  # never waiting on a FIFO, nor reading past the limit
        return []
    except _files.Unreadable as error:
        return [f"unable to read {label} {path} for {owner}: {error}"]
    except OSError as error:
        reason = (error.strerror or str(error)).lower()
        return [f"unable to read {label} {path} for {owner} due to open {path}: {reason}"]


def _impersonation(user: dict) -> Headers:
    """The impersonation headers kubectl sends for the user (flags already merged in)."""
    if not user.get("as"):
        return []
    headers = [("Impersonate-User", str(user["as"]))]
    headers += [("Impersonate-Group", str(group)) for group in _listed(user.get("as-groups"))]
    if user.get("as-uid"):
        headers.append(("Impersonate-Uid", str(user["as-uid"])))
    for key, values in _mapping(user.get("as-user-extra")).items():
        for value in values if isinstance(values, list) else [values]:
            headers.append(("Impersonate-Extra-" + extra_key(str(key)), str(value)))
    return headers


def _extra_merged(extra: Any, words: tuple[str, ...]) -> dict:
    """The user's ``as-user-extra`` with ``--as-user-extra``'s ``KEY=VALUE`` words merged in as
    kubectl merges them: a key the flags name gets their values, in order, instead of the
    kubeconfig's; the others are kept."""
    merged = dict(_mapping(extra))
    given: dict[str, list[str]] = {}
    for word in words:
        key, _, value = word.partition("=")
        given.setdefault(key, []).append(value)
    merged.update(given)
    return merged


#: The bytes a header name may hold as they are (RFC 7230's token), as client-go's ``legalHeaderKeyBytes``.
_TOKEN = frozenset(b"!#$&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


def extra_key(key: str) -> str:
    """An impersonation extra's key as client-go puts it in a header name: each byte that is no
    token byte, and ``%``, percent-encoded (the server decodes it), then the name's words
    capitalized as Go's ``CanonicalMIMEHeaderKey`` writes them (the server lowercases the key)."""
    escaped = "".join(chr(byte) if byte in _TOKEN else f"%{byte:02X}" for byte in key.encode("utf-8"))
    return "-".join(word[:1].upper() + word[1:].lower() for word in escaped.split("-"))


def _listed(value: Any) -> list:
    return value if isinstance(value, list) else []


def context_names(explicit: Optional[str], environ: dict) -> list[str]:
    """Every context of the kubeconfig (--kubeconfig, else KUBECONFIG, else ~/.kube/config), in
    file order, each once (the first file to name one wins, as kubectl merges them)."""
    if not kubeconfig_paths(explicit, environ):
        raise KvdtypeError("no kubeconfig found (~/.kube/config, KUBECONFIG, --kubeconfig): a fleet run needs "
                           "the contexts of one")
    return kubeconfig_names(explicit, environ, "contexts")


def _in_cluster(options: ConnectionOptions, environ: dict) -> Resolved:
    """The in-cluster service account (``_sources.incluster``) as a cluster and a user, the flags
    applied as kubectl applies them in a Pod (``--token``, ``--certificate-authority``, ``--as``...):
    either transport then serves it as it serves a kubeconfig."""
    account = _incluster.service_account(environ)
    cluster = _override_cluster({"server": account.server, **(
        {"certificate-authority": account.ca_file} if account.ca_file else {})}, options)
    user = _override_user({"token": account.token}, options)
    refusals = _refusals("", cluster, "", user)
    if refusals:
        raise (UsageError if options.overrides else KvdtypeError)("; ".join(refusals))
    _refuse_unsendable_headers(user, "")
    return Resolved(options, environ, in_cluster=True, cluster=cluster, user=user, user_dir=os.getcwd(),
                    what="the in-cluster service account", namespace=account.namespace,
                    impersonation=_impersonation(user))
