"""kuberc, kubectl's preferences file, as far as the plugin must honour it: its credential plugin policy.

Since 1.35 a user may forbid kubeconfigs from running programs: ``credentialPluginPolicy`` (``AllowAll``,
``DenyAll``, ``Allowlist``) and ``credentialPluginAllowlist`` in kuberc. kubectl dispatches the plugin
with the user's kuberc in force, so the plugin enforces the same policy before any exec credential
plugin starts (``check``), on either transport and for each context of a fleet, in kubectl's words.
The rest of kuberc (aliases, defaults) is kubectl's own business and is not read.

Where kubectl 1.37 finds it, and how it reads it (each rule seen on the pinned kubectl, and held to
it by ``tests/test_kuberc.py`` and the real tier):

- ``--kuberc FILE``, else ``KUBERC`` (``off``: none), else ``~/.kube/kuberc``; ``KUBECTL_KUBERC=false``
  (any case) turns kuberc off, and then ``--kuberc`` is an unknown flag; ``--kuberc`` with
  ``KUBERC=off`` is refused. A file named by the flag or ``KUBERC`` must be read: a missing one, or
  one with no valid preferences, is refused. ``~/.kube/kuberc`` is read if it can be, and skipped if
  it cannot, or holds no valid preferences.
- A file of blanks holds no preferences (everything allowed). Otherwise its documents (split at
  ``---`` lines) are read in order, and the first that is a ``Preference`` of
  ``kubectl.config.k8s.io/v1beta1`` or ``v1alpha1`` (the latter knows no policy) is the preferences; a
  document that does not parse, is of another kind, or gives a known field the wrong type is skipped.
- The policy is validated whoever's file it is (an unknown policy, an allowlist with no entry or
  beside a policy other than ``Allowlist``, an entry that is not a clean path are refused).
- A command is matched as client-go matches it: the command as written (cleaned; a relative path made
  absolute against its kubeconfig's directory) or as found on ``PATH`` against each entry, or each
  entry as found on ``PATH``; the path that was checked is the path that runs.

Read only when an exec plugin is about to run: a run without one never reads kuberc, and a run that
kubectl dispatches has had its kuberc read (and any refusal of it said) by kubectl already.
"""

from __future__ import annotations

import os
import posixpath
import stat
import threading
from typing import Any, Optional

from kubectl_kvdtype._kits import files as _files
from kubectl_kvdtype._kits.records import record_type
from kubectl_kvdtype._kits.status import KvdtypeError, UsageError

ALLOW_ALL, DENY_ALL, ALLOWLIST = "AllowAll", "DenyAll", "Allowlist"
#: The apiVersions whose ``Preference`` kubectl 1.37 reads; only v1beta1 has the policy.
_API_VERSIONS = ("kubectl.config.k8s.io/v1beta1", "kubectl.config.k8s.io/v1alpha1")
_WITH_POLICY = "kubectl.config.k8s.io/v1beta1"
#: kuberc holds aliases and defaults: a few kB. A bigger one is refused, not parsed.
KUBERC_RULE = _files.FileRule("a kuberc file", 1 << 20, "the most read of a kuberc (preferences are a few kB)")


class KubercError(KvdtypeError):
    """kuberc refused as kubectl refuses it (exit 3, as an exec plugin that fails)."""


@record_type(frozen=True)
class Policy:
    """The credential plugin policy in force: ``policy`` as written ("" when unset), its allowlist
    (None when unset) and the file it came from ("" for none)."""

    policy: str = ""
    allowlist: Optional[tuple[str, ...]] = None
    source: str = ""

    def check(self, command: str, directory: str) -> str:
        """The path to run for an exec plugin's ``command`` (its kubeconfig's ``directory`` makes a
        relative one absolute), or ``KubercError`` in kubectl's words when the policy forbids it."""
        configured = _configured(command, directory)
        if self.policy in ("", ALLOW_ALL):
            return configured
        if self.policy == DENY_ALL:
            raise self._refused(f'plugin "{configured}" not allowed: policy set to "{DENY_ALL}"')
        return self._allowlisted(configured)

    def _allowlisted(self, configured: str) -> str:
        entries = set(self.allowlist or ())
        found, error = _look_path(configured)
        if configured in entries or found in entries:
            return found or configured
        if error is not None:
            raise self._refused(f'plugin path "{configured}" cannot be resolved for credential plugin allowlist '
                                f"check: {error}")
        if found in {_look_path(entry)[0] for entry in entries}:
            return str(found)
        raise self._refused(f'plugin path "{found}" is not permitted by the credential plugin allowlist')

    def _refused(self, why: str) -> KubercError:
        return KubercError(f"getting credentials: {why} (kuberc {self.source}: the exec credential plugin of the "
                           "kubeconfig user was not run)")


def _configured(command: str, directory: str) -> str:
    """The command as client-go holds it: a path (it holds a ``/``) made absolute against the
    kubeconfig's directory, and cleaned as Go cleans a path; a bare name as it is."""
    if "/" not in command:
        return command
    return _clean(posixpath.join(directory, command) if not command.startswith("/") else command)


def _clean(path: str) -> str:
    """Go's ``filepath.Clean``: ``normpath``, and a leading ``//`` as one ``/`` (POSIX keeps two)."""
    cleaned = posixpath.normpath(path)
    return "/" + cleaned.lstrip("/") if cleaned.startswith("//") else cleaned


def _look_path(name: str) -> tuple[Optional[str], Optional[str]]:
    """Go's ``exec.LookPath``: (the path, None) or (None, its error in Go's words)."""
    if "/" in name:
        why = _not_executable(name)
        return (name, None) if why is None else (None, f'exec: "{name}": {why}')
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        path = posixpath.join(directory or ".", name)
        if _not_executable(path) is None:
            if not posixpath.isabs(path):  # Go refuses a program found through a relative PATH entry
                return None, f'exec: "{name}": cannot run executable found relative to current directory'
            return path, None
    return None, f'exec: "{name}": executable file not found in $PATH'


def _not_executable(path: str) -> Optional[str]:
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        return f"stat {path}: {(error.strerror or str(error)).lower()}"
    return "permission denied" if stat.S_ISDIR(mode) or not mode & 0o111 else None


# --- Finding and reading kuberc ----------------------------------------------------------------


@record_type(frozen=True)
class Preferences:
    """Where a run's kuberc is found: the ``--kuberc`` flag and the environment, read when an exec
    plugin is about to run (``policy``), once for the process."""

    flag: Optional[str]
    environ: Any

    def policy(self) -> Policy:
        return policy(self.flag, self.environ)


_READ: dict[tuple, Policy] = {}  # (flag, KUBERC, KUBECTL_KUBERC, HOME) -> its policy: a fleet reads it once
_READ_LOCK = threading.Lock()


def policy(flag: Optional[str], environ: Any) -> Policy:
    """The credential plugin policy of the kuberc kubectl would read, refused as kubectl refuses it."""
    key = (flag, environ.get("KUBERC"), environ.get("KUBECTL_KUBERC"), environ.get("HOME"))
    with _READ_LOCK:
        if key not in _READ:
            _READ[key] = _policy(flag, environ)
        return _READ[key]


def check_switches(flag: Optional[str], environ: Any) -> None:
    """``--kuberc`` where kubectl refuses it whatever the run (kuberc turned off), read from the
    environment alone: a run checks it when it resolves its kubeconfig, before any file is read."""
    if flag is None:
        return
    if str(environ.get("KUBECTL_KUBERC", "")).lower() == "false":
        raise UsageError("unknown flag: --kuberc (KUBECTL_KUBERC=false turns kuberc off, as in kubectl)")
    if environ.get("KUBERC") == "off":
        raise KubercError("kuberc: disabling kuberc via KUBERC=off and passing kuberc flag are mutually exclusive")


def _policy(flag: Optional[str], environ: Any) -> Policy:
    check_switches(flag, environ)
    if str(environ.get("KUBECTL_KUBERC", "")).lower() == "false":
        return Policy()
    variable = environ.get("KUBERC") or ""
    if flag is not None:
        if not flag:
            raise KubercError("kuberc: kuberc file is not found (--kuberc is empty)")
        return _validated(_read(flag, strict=True))
    if variable == "off":
        return Policy()
    if variable:
        return _validated(_read(variable, strict=True))
    home = os.path.expanduser(environ.get("HOME") or "~")
    return _validated(_read(os.path.join(home, ".kube", "kuberc"), strict=False))


def _read(path: str, strict: bool) -> Policy:
    """The policy of the file at ``path``; where it cannot be read or holds no valid preferences,
    refused (``strict``: a file named by the flag or KUBERC) or none."""
    try:
        text = _files.read_text(path, KUBERC_RULE)
    except _files.Unreadable as error:
        if not strict:
            return Policy()
        raise KubercError(f"kuberc: the kuberc {path} {error.predicate}") from None
    except (OSError, UnicodeDecodeError) as error:
        if not strict:
            return Policy()
        if isinstance(error, UnicodeDecodeError):
            raise KubercError(f"kuberc: no valid preferences found in {path}") from None
        raise KubercError(f"kuberc: open {path}: {(error.strerror or str(error)).lower()}") from None
    if not text.strip():
        return Policy(source=path)
    for document in _documents(text):
        found = _preference(document, path)
        if found is not None:
            return found
    if not strict:
        return Policy()
    raise KubercError(f"kuberc: no valid preferences found in {path} (a Preference of {_WITH_POLICY}; "
                      "kubectl refuses it too)")


def _documents(text: str) -> list[str]:
    """The texts of its YAML documents, split at ``---`` lines as kubectl's YAML reader splits them."""
    documents: list[str] = []
    current: list[str] = []
    for line in text.splitlines(keepends=True):
        if line.startswith("---") and not line[3:].strip():
            documents.append("".join(current))
            current = []
        else:
            current.append(line)
    documents.append("".join(current))
    return [document for document in documents if document.strip()]


def _preference(text: str, path: str) -> Optional[Policy]:
    """The document's policy when it is a valid Preference, else None (kubectl skips it)."""
    document = _parsed(text)
    if not isinstance(document, dict) or document.get("kind") != "Preference" \
            or document.get("apiVersion") not in _API_VERSIONS:
        return None
    if not all(isinstance(document.get(key), (list, type(None))) for key in ("aliases", "defaults")):
        return None
    if document["apiVersion"] != _WITH_POLICY:
        return Policy(source=path)
    policy, allowlist = document.get("credentialPluginPolicy"), document.get("credentialPluginAllowlist")
    if not isinstance(policy, (str, type(None))) or not isinstance(allowlist, (list, type(None))):
        return None
    names = []
    for entry in allowlist or []:
        if not isinstance(entry, (dict, type(None))) or not isinstance((entry or {}).get("name"), (str, type(None))):
            return None
        names.append((entry or {}).get("name") or "")
    return Policy(policy or "", None if allowlist is None else tuple(names), path)


def _parsed(text: str) -> Any:
    """One document's text parsed as YAML (bounded), or None when it does not parse."""
    from kubectl_kvdtype._kits import blockyaml as _blockyaml
    from kubectl_kvdtype._kits import bounded as _bounded

    mapping = _bounded.loads_as_yaml(text)
    if mapping is None:
        mapping = _blockyaml.loads_block_mapping(text)
    if mapping is not None:
        return mapping
    import yaml

    from kubectl_kvdtype._sources import yamlread as _yamlread

    try:
        documents = _yamlread.load_all(text)
    except (yaml.YAMLError, ValueError):
        return None
    return documents[0] if len(documents) == 1 else None


def _validated(found: Policy) -> Policy:
    """client-go's validation of a policy and its allowlist, in its words."""
    policy, allowlist = found.policy, found.allowlist
    if policy in ("", ALLOW_ALL, DENY_ALL):
        if allowlist is not None:
            raise _invalid(found, "misconfigured credential plugin allowlist: plugin policy is "
                                  f'"{policy}" but allowlist is non-nil')
        return found
    if policy != ALLOWLIST:
        raise _invalid(found, f'unknown plugin policy: "{policy}"')
    if allowlist is None:
        raise _invalid(found, f'credential plugin policy set to "{ALLOWLIST}", but allowlist is unspecified')
    if not allowlist:
        raise _invalid(found, f'credential plugin policy set to "{ALLOWLIST}", but allowlist is empty; use '
                              f'"{DENY_ALL}" policy instead')
    for number, entry in enumerate(allowlist, 1):
        if not entry:
            raise _invalid(found, f"misconfigured credential plugin allowlist: empty allowlist entry #{number}")
        if _clean(entry) != entry:
            raise _invalid(found, f'non-normalized file path: "{entry}" vs "{_clean(entry)}"')
    return found


def _invalid(found: Policy, why: str) -> KubercError:
    return KubercError(f"kuberc {found.source}: {why}")
