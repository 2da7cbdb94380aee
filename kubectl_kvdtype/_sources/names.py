"""Names as the API server validates them, checked before a name is used for anything.

A namespace or object name becomes a segment of a request path, a label selector's value, and a
command printed for the user to paste. Whoever may write a name (a flag, a manifest fed to ``-f``,
an object in the cluster) could otherwise choose what is read or deleted (``../../api/v1/...``)
or what command is printed. So each name is checked as the API server checks it for its kind
(``RULES``): a namespace is a DNS-1123 label, an object name a DNS-1123 subdomain, a label value
a label value, in the API server's (and kubectl's) words. Pure: no client, no I/O.
"""

from __future__ import annotations

import re
from typing import Callable, Iterable, Optional

from kubectl_kvdtype._kits.codes import INVALID_NAME
from kubectl_kvdtype._kits.display import shown
from kubectl_kvdtype._kits.report import Finding, ObjectRef
from kubectl_kvdtype._kits.status import KvdtypeError, UsageError
from kubectl_kvdtype._sources.kinds import Kind

LABEL = "label"
SUBDOMAIN = "subdomain"
LABEL_VALUE = "label value"
#: An APIService's name, ``<version>.<group>`` (the core group's ``v1.``, whose group is empty).
API_SERVICE = "apiservice"

_LABEL_RE = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_PATTERNS = {
    LABEL: (re.compile(_LABEL_RE), 63,
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
            "start and end with an alphanumeric character (e.g. 'my-name', or '123-abc', regex used for "
            f"validation is '{_LABEL_RE}')"),
    SUBDOMAIN: (re.compile(rf"{_LABEL_RE}(\.{_LABEL_RE})*"), 253,
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                rf"validation is '{_LABEL_RE}(\.{_LABEL_RE})*')"),
    LABEL_VALUE: (re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"), 63,
                  "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                  "and must start and end with an alphanumeric character (e.g. 'MyValue', or 'my_value', or "
                  "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"),
    API_SERVICE: (re.compile(rf"{_LABEL_RE}\.({_LABEL_RE}(\.{_LABEL_RE})*)?"), 253,
                  "an APIService's name must be <version>.<group> (the core group's: v1.)"),
}

#: The rule the API server applies to each kind's names; a kind not listed has DNS-1123 subdomain
#: names (what the API server checks for custom resources, Pods and the workloads read here).
RULES = {"Namespace": LABEL, "APIService": API_SERVICE}


def problems(value: object, rule: str) -> list[str]:
    """What the API server would say is wrong with ``value`` under ``rule`` (empty: valid)."""
    if not isinstance(value, str):
        return ["must be a string"]
    found = [f"may not be '{value}'"] if value in (".", "..") else []
    found += [f"may not contain '{c}'" for c in "/%" if c in value]  # kubectl's path segment check
    if found:
        return found
    pattern, longest, words = _PATTERNS[rule]
    if len(value) > longest:
        found.append(f"must be no more than {longest} characters")
    if rule != LABEL_VALUE and not value:
        return ["may not be empty"]
    if not pattern.fullmatch(value):
        found.append(words)
    return found


def rule_of(kind: str) -> str:
    return RULES.get(kind, SUBDOMAIN)


def is_valid(value: object, rule: str) -> bool:
    return not problems(value, rule)


def invalid(what: str, value: object, found: list[str]) -> str:
    """``invalid namespace "../x": [may not contain '/']``: the sentence kubectl says."""
    return f'invalid {what} "{shown(str(value))}": [{"; ".join(found)}]'


def check_flag(what: str, value: Optional[str], rule: str) -> None:
    """A name typed on the command line: exit 2 when it is not one."""
    if value is not None:
        found = problems(value, rule)
        if found:
            raise UsageError(invalid(what, value, found))


def check_configured(what: str, value: object, rule: str, where: str) -> None:
    """A name from a kubeconfig or the cluster (``where`` says which): exit 3 when it is not one."""
    found = problems(value, rule)
    if found:
        raise KvdtypeError(f"{invalid(what, value, found)} in {where}")


def _one_match(rule: str) -> Callable[[object], bool]:
    """Whether a value is a name under ``rule`` (a label or a subdomain, which may not be empty),
    found in one match: what :func:`problems` finds wrong, a name it accepts never fails (``.``,
    ``..``, ``/`` and ``%`` do not match the pattern either). A big list checks tens of thousands
    of names; only one that fails here is asked what is wrong with it."""
    pattern, longest, _ = _PATTERNS[rule]
    fullmatch = pattern.fullmatch

    def plainly_valid(value: object) -> bool:
        return isinstance(value, str) and 0 < len(value) <= longest and fullmatch(value) is not None
    return plainly_valid


#: The one-match check of each rule whose names may not be empty (``rule_of`` gives no other).
_PLAINLY_VALID = {rule: _one_match(rule) for rule in (LABEL, SUBDOMAIN, API_SERVICE)}


def _plainly_valid(value: object, rule: str) -> bool:
    return _PLAINLY_VALID[rule](value)


def object_problem(kind: Kind, namespace: object, name: object) -> Optional[str]:
    """Why an object read (a manifest, a cluster answer) cannot be used, or None: its name or
    namespace is not one the API server would accept for its kind."""
    rule = rule_of(kind.name)
    if _plainly_valid(name, rule) and (not kind.namespaced or _plainly_valid(namespace, LABEL)):
        return None
    found = problems(name, rule)
    if found:
        return invalid(f"{kind.name} name", name, found)
    if kind.namespaced:
        found = problems(namespace, LABEL)
        if found:
            return invalid("namespace", namespace, found)
    return None


def listed_refusals(kind: Kind, objects: Iterable[object], where: str) -> tuple[list[dict], list[Finding]]:
    """The objects of a list (mappings) whose name and namespace the API server accepts, in order,
    and the ``refusal`` finding of each other mapping: what ``refusal`` says of each, in one loop
    that asks it only about a name the one-match check does not pass, and matches each namespace
    once (a page of a big list repeats a few namespaces hundreds of times)."""
    name_valid, namespaced = _PLAINLY_VALID[rule_of(kind.name)], kind.namespaced
    namespaces_valid: set[str] = set()
    kept: list[dict] = []
    found: list[Finding] = []
    for obj in objects:
        if not isinstance(obj, dict):
            continue
        metadata = obj.get("metadata")
        name, namespace = (metadata.get("name"), metadata.get("namespace") or "") if isinstance(metadata, dict) \
            else (None, "")
        if name_valid(name) and (not namespaced or _namespace_valid(namespace, namespaces_valid)):
            kept.append(obj)
            continue
        finding = refusal(kind, namespace, name, where)
        if finding is None:
            kept.append(obj)
        else:
            found.append(finding)
    return kept, found


def _namespace_valid(namespace: object, valid: set[str]) -> bool:
    """Whether ``namespace`` passes the one-match check, remembered in ``valid`` when it does (a
    string only: whatever else a server answers may not even be hashable)."""
    if not isinstance(namespace, str):
        return False
    if namespace in valid:
        return True
    if _plainly_valid(namespace, LABEL):
        valid.add(namespace)
        return True
    return False


def refusal(kind: Kind, namespace: object, name: object, where: str) -> Optional[Finding]:
    """The finding about an object read from ``where`` (a file, the cluster's answer) whose name
    or namespace the API server refuses, or None when both are valid. Such an object is never
    judged: no to-do item or command is built from a name that could steer a request."""
    problem = object_problem(kind, namespace, name)
    if problem is None:
        return None
    ref = ObjectRef(kind.name, str(namespace or "") or None if kind.namespaced else None, str(name or ""))
    return Finding.of(INVALID_NAME, ref, f"{problem}, read from {where}: the API server refuses such a name, so "
                                         "the object is not judged and no command is built from it", file=where)
