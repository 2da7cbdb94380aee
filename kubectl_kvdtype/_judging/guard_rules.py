"""The guard's rules: the upgrade's refusals as ValidatingAdmissionPolicies, written from the engine
records in force and the argv reader's own answers (``_engines.spellings.flag_spellings``), never by hand.

Three policies, each with a binding of the same name (docs/reference.md, "guard"):

- ``ROLES``: a pool-attached ModelDeployment's managed role whose ``extraArgs`` hold an entry its
  engine, at the version the deployment declares, reads as the flag (the spellings are the reader's
  for each group of recorded releases; a version CEL cannot read is the reference release's, as the
  reader judges it);
- ``PODS``: a Pod, or a workload's Pod template (a CronJob's one level deeper), that opts into
  injection and whose target container (the one the annotation names, else the only one) passes
  the flag itself, the webhook's own copy on an injected Pod left out;
- ``BINDINGS``: a new Binding declaring ``auto``, or a dtype no recorded release of any engine accepts.

What CEL cannot decide is left alone, never guessed (``check`` and ``find-flags`` decide it): an
argv holding a shell line or a ``$(VAR)``, a Pod whose engine only the webhook's JSON record names,
an argv longer than the reader reads. Every list walked is bounded (``MAX_ARGV_TOKENS`` entries,
the reader's own bound) before it is walked, so each expression's cost at run time stays within
the API server's budget whatever the object's size.
"""

from __future__ import annotations

import json
from typing import Optional, Sequence

from kubectl_kvdtype import __version__
from kubectl_kvdtype._engines import records as _records
from kubectl_kvdtype._engines import spellings as _engine_spellings
from kubectl_kvdtype._engines.argv import MAX_ARGV_TOKENS
from kubectl_kvdtype._sources import model as _model
from kubectl_kvdtype._sources.kinds import FIELD_MANAGER

ROLES, PODS, BINDINGS = "kubectl-kvdtype-guard-roles", "kubectl-kvdtype-guard-pods", "kubectl-kvdtype-guard-bindings"
POLICY_NAMES = (ROLES, PODS, BINDINGS)
API_VERSION = "admissionregistration.k8s.io/v1"
#: The label every guard object carries: what ``guard`` and ``check`` find it by.
MANAGED_LABEL = "app.kubernetes.io/managed-by"
#: The plugin's version, the fingerprint of the rules and the added tables, as the guard was written.
VERSION_ANNOTATION = "kvdtype.gpustack.ai/guard-version"
RECORDS_ANNOTATION = "kvdtype.gpustack.ai/guard-records"
TABLES_ANNOTATION = "kvdtype.gpustack.ai/guard-tables"
#: ``validationActions``: the default warns the client applying and records it in the audit log.
WARN, DENY = ("Warn", "Audit"), ("Deny",)
#: A guard that fails to evaluate lets the write through: it holds the upgrade's rules early, and
#: its own failure must never refuse a write its rules did not decide (check still sees the object).
FAILURE_POLICY = "Ignore"
#: The most a policy walks, so that its cost at run time stays within the API server's CEL budget at
#: the request size limit: past these it decides nothing (check and find-flags still judge it).
MAX_ROLES, MAX_ROLE_ENTRIES, MAX_CONTAINERS, MAX_ENTRY = 16, 512, 64, 2048
#: What the messages quote of an entry: its first characters.
SHOWN = 60
#: Whitespace as Python's ``str.isspace`` knows it (the reader's test of a spaced entry), in RE2.
_WS = r"[\t-\r \x{1c}-\x{1f}\x{85}\p{Z}]"
_NON_WS = r"[^\t-\r \x{1c}-\x{1f}\x{85}\p{Z}]"
_NON_WS_OR_EQUALS = _NON_WS[:-1] + "=]"

WORKLOAD_RESOURCES = ("deployments", "statefulsets", "daemonsets", "replicasets")


def lit(text: str) -> str:
    """``text`` as a CEL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _list(values: Sequence[str]) -> str:
    return "[" + ", ".join(lit(v) for v in values) + "]"


# --- The argv tests, from the reader's spellings ---------------------------------------------

def _spaced(token: str) -> str:
    """An entry whose option part (before its first ``=``) holds whitespace once stripped: argparse
    takes it as a positional, not as the flag. argparse splits at ``=`` before it looks for a space,
    so ``--kv-cache-dtype=fp8 x`` is the flag with the value ``fp8 x``, as the reader reads it."""
    return f"{token}.matches({lit('^[^=]*' + _WS + '+' + _NON_WS_OR_EQUALS)})"


def _dotted(token: str, names: str) -> str:
    """A dotted option of one of ``names`` (``NAME.KEY``), which vLLM's rewriting turns into the flag
    with a JSON value; ``names`` is empty for an engine that rewrites none (asked only with a dot)."""
    return f"({token}.contains('.') && {names}.exists(n, {token}.startsWith(n + '.')))"


def _located(token: str, names: str, dotted: str) -> str:
    """An entry the reader reports as a copy of the flag, read or not (the webhook's copy is the
    last): one of ``names`` (a CEL list) bare or ``=VALUE``, or, spaced, followed by a space; or a
    dotted option of one of ``dotted``."""
    return (f"(type({token}) == string && {token}.startsWith('-') && {token}.contains('kv') && ({names}.exists(n, "
            f"{token} == n || {token}.startsWith(n + '=') || ({token}.startsWith(n + ' ') && {_spaced(token)})) "
            f"|| {_dotted(token, dotted)}))")


def _read(token: str, names: str, dotted: str) -> str:
    """An entry the engine reads as the flag: one of its names bare or ``=VALUE``, not spaced, or a
    dotted option of one of ``dotted`` (spaced or not: the rewriting splits it at its first dot)."""
    return (f"(type({token}) == string && {token}.startsWith('--') && (({names}.exists(n, {token} == n "
            f"|| {token}.startsWith(n + '=')) && !{_spaced(token)}) || {_dotted(token, dotted)}))")


def _undecided(token: str) -> str:
    """An entry CEL does not read: a ``$(VAR)`` the kubelet expands, or a shell line the reader splits."""
    return (f"(type({token}) == string && (size({token}) > {MAX_ENTRY} || {token}.contains('$(') "
            f"|| (!{token}.startsWith('-') "
            f"&& ({token}.contains('kv-cache') || {token}.contains('kv_cache')) && {token}.matches({lit(_WS)}))))")


def _swallowing(argv: str, dotted: str) -> str:
    """An argv where vLLM's rewriting takes an option as a value: a dotted option written without ``=``
    takes the next entry, whatever it is, and whether that entry is a copy of the flag then depends
    on the run of dotted options before it, which CEL does not follow: left to find-flags. Only for
    an engine that rewrites dotted options (``dotted`` not empty)."""
    return (f"(size({dotted}) > 0 && {argv}.exists(i, a, type(a) == string && a.startsWith('-') && a.contains('.') "
            f"&& !a.contains('=') && i + 1 < size({argv}) && type({argv}[i + 1]) == string "
            f"&& {argv}[i + 1].startsWith('-')))")


#: Characters a Warning header may not carry: the API server drops a warning holding one.
_CONTROL = r"[\x00-\x1f\x7f-\x9f]"


def _shown(token: str) -> str:
    """An entry as a message quotes it: its first characters, or a description when it holds a
    control character (which would drop the whole warning)."""
    return (f"({token}.matches({lit(_CONTROL)}) ? 'an entry holding control characters' : "
            f"size({token}) > {SHOWN} ? {token}.substring(0, {SHOWN}) + '...' : {token})")


# --- Engines and versions --------------------------------------------------------------------

def _engine_of(declared: str) -> str:
    """The canonical engine name of a declared one (a CEL string), '' for none the records know."""
    cases = " : ".join(f"{declared}.trim().lowerAscii() in {_list([a.lower() for a in (r.name, *r.aliases)])} "
                       f"? {lit(r.name)}" for r in _records.RECORDS)
    return f"{cases} : ''"


def _release_below(version: str, boundary: str) -> str:
    """CEL: the readable ``version`` text (lower-cased) comes before the recorded ``boundary``
    release in PEP 440 order, as ``_engines.records.parse_version`` orders them: its release numbers
    first, then, at an equal release, a pre-release or a development release before it."""
    bound = [int(p) for p in _records.known_version(boundary).text.split(".")]
    parts = f"{version}.find('[0-9]+([.][0-9]+)*').split('.').map(p, size(p) > 15 ? 999999999999999 : int(p))"
    # Lexicographic over the boundary's numbers, a missing number counting as 0.
    less: list[str] = []
    equal: list[str] = []
    for position, number in enumerate(bound):
        at = f"(size(r) > {position} ? r[{position}] : 0)"
        less.append(" && ".join(equal + [f"{at} < {number}"]))
        equal.append(f"{at} == {number}")
    equal_all = " && ".join(equal + [f"r.all(i, x, i < {len(bound)} || x == 0)"])
    trimmed = list(bound)
    while len(trimmed) > 1 and trimmed[-1] == 0:
        trimmed.pop()
    release_re = r"\.".join(f"0*{n}" if n else "0+" for n in trimmed) + r"(\.0+)*"
    pre = lit(rf"^{_WS}*v?{release_re}[-_.]?(alpha|beta|preview|pre|rc|a|b|c)([^a-z]|$)")
    dev = lit(rf"^{_WS}*v?{release_re}[-_.]?dev([^a-z]|$)")
    return (f"[{parts}].exists(r, ({' || '.join(f'({x})' for x in less)}) || "
            f"(({equal_all}) && ({version}.matches({pre}) || {version}.matches({dev}))))")


def _readable(version: str) -> str:
    return f"{version}.matches({lit('^' + _WS + '*v?[0-9]')})"


def _spellings(engine: str, version: Optional[str], which: str) -> str:
    """CEL: the names (``which``: "read" or "located") the engine at the version meets as the flag,
    chosen among the groups of recorded releases; an unreadable version, or none (a Pod), is the
    reference release's; an engine the records do not know is read as any engine reads it."""
    anyone = _list(getattr(_engine_spellings.flag_spellings(None, None), which))
    choice = anyone
    for record in reversed(_records.RECORDS):
        reference = _list(getattr(_engine_spellings.reference_spellings(record.name), which))
        if version is None:
            by_version = reference
        else:
            groups = _engine_spellings.spelling_groups(record.name)
            by_version = _list(getattr(groups[0][1], which))
            for first, found in groups[1:]:
                by_version = (f"!{_release_below(version, first)} ? {_list(getattr(found, which))} : "
                              f"({by_version})")
            by_version = f"!{_readable(version)} ? {reference} : ({by_version})"
        choice = f"{engine} == {lit(record.name)} ? ({by_version}) : ({choice})"
    return choice


# --- The policies ---------------------------------------------------------------------------

def _text(value: str) -> str:
    """A field as the reader's ``_sources.model.text`` takes it: a string, a number's text, else ''."""
    return (f"(type({value}) == string ? string({value}) : type({value}) == int || type({value}) == double "
            f"? string({value}) : '')")


_REF = ("request.namespace + '/' + (request.name != '' ? request.name : "
        "(has(object.metadata.generateName) ? object.metadata.generateName + '*' : '?'))")
#: An UPDATE is judged only when it writes the spec: the operator's own metadata writes (finalizers)
#: are never held up, in Deny mode either.
_SPEC_CHANGED = ("request.operation == 'CREATE' || !has(oldObject.spec) || !has(object.spec) "
                 "|| oldObject.spec != object.spec")


def roles_policy() -> dict:
    """Pool-attached ModelDeployments' managed roles passing the flag in ``extraArgs``."""
    args = ("type(r.extraArgs) == string ? [r.extraArgs] : type(r.extraArgs) == list "
            "? r.extraArgs.filter(a, type(a) == string) : []")
    read = _read("a", "variables.read", "variables.dottedRead")
    # Each managed role's entries up to the first "--" (argparse reads no option after it).
    bounded = (f"size(object.spec.roles) <= {MAX_ROLES} && object.spec.roles.map(r, type(r) == map && "
               f"has(r.extraArgs) && type(r.extraArgs) == list ? size(r.extraArgs) : 1).sum() <= {MAX_ROLE_ENTRIES}")
    flagged = (f"!({bounded}) ? [] : object.spec.roles.filter(r, type(r) == map && "
               f"!(has(r.command) && (type(r.command) == list || type(r.command) == string) && size(r.command) > 0) "
               f"&& has(r.extraArgs)).map(r, {{'name': dyn(has(r.name) && !{_text('r.name')}.matches({lit(_CONTROL)}) "
               f"? {_text('r.name')} : '?'), "
               f"'args': dyn({args})}})"
               f".filter(r, size(r.args) <= {MAX_ARGV_TOKENS} && !r.args.exists(a, {_undecided('a')}) "
               f"&& !{_swallowing('r.args', 'variables.dottedRead')} "
               f"&& r.args.exists(i, a, {read} && (r.args.indexOf('--') < 0 || i < r.args.indexOf('--'))))")
    first = (f"variables.flagged[0].args.filter(a, {read})[0]")
    message = (f"'ModelDeployment ' + {_REF} + ': role(s) ' + variables.flagged.map(r, r.name).join(', ') + "
               f"' pass --kv-cache-dtype in extraArgs (' + {_shown(first)} + ' in role ' + variables.flagged[0].name + "
               "'), which after the gpustack-operator upgrade it refuses on a pool-attached role (the Binding\\'s "
               "dtype is rendered instead): remove the entry from extraArgs (kubectl kvdtype find-flags --fix)'")
    engine_field = "object.spec.engine"
    return _policy(ROLES, [{"apiGroups": ["worker.gpustack.ai"], "apiVersions": ["*"],
                            "operations": ["CREATE", "UPDATE"], "resources": ["modeldeployments"]}],
                   [{"name": "pool-attached",
                     "expression": "has(object.spec) && has(object.spec.kvCache) && type(object.spec.kvCache) == map "
                                   "&& has(object.spec.roles) && type(object.spec.roles) == list"},
                    {"name": "spec-written", "expression": _SPEC_CHANGED}],
                   [{"name": "engine",
                     "expression": _engine_of(f"(type({engine_field}) == map ? (has({engine_field}.name) ? "
                                              f"{_text(engine_field + '.name')} : '') : {_text(engine_field)})")},
                    {"name": "version",
                     "expression": f"(type({engine_field}) == map ? (has({engine_field}.version) ? "
                                   f"{_text(engine_field + '.version')} : '') : (has(object.spec.engineVersion) ? "
                                   f"{_text('object.spec.engineVersion')} : '')).lowerAscii()"},
                    {"name": "read", "expression": _spellings("variables.engine", "variables.version", "read")},
                    {"name": "dottedRead",
                     "expression": _spellings("variables.engine", "variables.version", "dotted_read")},
                    {"name": "flagged", "expression": flagged}],
                   [{"expression": "size(variables.flagged) == 0", "messageExpression": message,
                     "message": "a pool-attached ModelDeployment role passes --kv-cache-dtype in extraArgs, which the "
                                "upgraded gpustack-operator refuses: remove it (kubectl kvdtype find-flags)",
                     "reason": "Forbidden"}])


def pods_policy() -> dict:
    """Pods, and workloads' Pod templates, that opt into injection and pass the flag themselves."""
    template = ("object.kind == 'Pod' ? object : object.kind == 'CronJob' "
                "? (has(object.spec.jobTemplate) && has(object.spec.jobTemplate.spec) "
                "&& has(object.spec.jobTemplate.spec.template) ? object.spec.jobTemplate.spec.template : {}) "
                ": (has(object.spec.template) ? object.spec.template : {})")
    annotations = ("has(variables.template.metadata) && has(variables.template.metadata.annotations) "
                   "? variables.template.metadata.annotations : {}")
    containers = ("has(variables.template.spec) && has(variables.template.spec.containers) "
                  "&& type(variables.template.spec.containers) == list "
                  f"&& size(variables.template.spec.containers) <= {MAX_CONTAINERS} "
                  "? variables.template.spec.containers.filter(c, type(c) == map) : []")
    wanted = (f"'{_model.CONTAINER_ANNOTATION}' in variables.annotations "
              f"&& variables.annotations['{_model.CONTAINER_ANNOTATION}'] != ''")
    target = (f"{wanted} ? variables.containers.filter(c, has(c.name) && c.name == "
              f"variables.annotations['{_model.CONTAINER_ANNOTATION}']) : (size(variables.containers) == 1 "
              "? variables.containers : [])")
    field = ("(has(variables.target[0].{0}) && type(variables.target[0].{0}) == list "
             "? variables.target[0].{0}.filter(a, type(a) == string) : [])")
    size_of = ("(has(variables.target[0].{0}) && type(variables.target[0].{0}) == list "
               "? size(variables.target[0].{0}) : 0)")
    declared = f"variables.annotations['{_model.ENGINE_ANNOTATION}']"
    # The reader's engine: the annotation, else the webhook's record (JSON CEL does not read: undecided).
    engine = (f"'{_model.ENGINE_ANNOTATION}' in variables.annotations ? ({_engine_of(_text(declared))}) : "
              f"'{_model.INJECTED_ANNOTATION}' in variables.annotations ? '?' : ''")
    located = _located("a", "variables.located", "variables.dottedLocated")
    read = _read("a", "variables.read", "variables.dottedRead")
    # The entries read up to the first "--"; on an injected Pod the last copy located in args is the webhook's.
    cut = "(variables.argv.indexOf('--') < 0 ? size(variables.argv) : variables.argv.indexOf('--'))"
    webhook = (f"'{_model.INJECTED_ANNOTATION}' in variables.annotations "
               f"? ([-1] + variables.argv.transformList(i, a, i >= size(variables.command) && i < variables.cut "
               f"&& {located} ? i : -1)).max() : -1")
    own = (f"([-1] + variables.argv.transformList(i, a, i < variables.cut && i != variables.webhook && {read} "
           "? i : -1)).max()")
    decided = (f"size(variables.target) == 1 && variables.engine != '?' && !variables.tooLong "
               f"&& !variables.argv.exists(a, {_undecided('a')}) "
               f"&& !{_swallowing('variables.argv', 'variables.dottedLocated')}")
    entry = "variables.argv[variables.own]"
    place = ("(variables.own < size(variables.command) ? 'command[' + string(variables.own) + ']' : "
             "'args[' + string(variables.own - size(variables.command)) + ']')")
    fix = ("(object.kind == 'Pod' ? 'the webhook refuses such a Pod at creation after the gpustack-operator upgrade: "
           "create it without the flag, or fix its owner\\'s template' : 'the webhook refuses every Pod this ' + "
           "object.kind + ' creates after the gpustack-operator upgrade (FailedCreate): remove it from the Pod "
           "template\\'s command and args (kubectl kvdtype find-flags --fix)')")
    message = (f"object.kind + ' ' + {_REF} + ': container ' + variables.target[0].name + ' passes ' + "
               f"{_shown(entry)} + ' at ' + {place} + ' itself while it opts into KV cache injection; ' + {fix}")
    return _policy(PODS, [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]},
                          {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                           "resources": list(WORKLOAD_RESOURCES)},
                          {"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                           "resources": ["jobs", "cronjobs"]}],
                   [{"name": "spec-written", "expression": _SPEC_CHANGED}],
                   [{"name": "template", "expression": template},
                    {"name": "annotations", "expression": annotations},
                    {"name": "optsIn",
                     "expression": f"has(variables.template.metadata) && has(variables.template.metadata.labels) "
                                   f"&& '{_model.INJECT_LABEL}' in variables.template.metadata.labels && "
                                   f"variables.template.metadata.labels['{_model.INJECT_LABEL}'] == 'true'"},
                    {"name": "containers", "expression": containers},
                    {"name": "target", "expression": f"!variables.optsIn ? [] : {target}"},
                    # An argv longer than the reader reads is not walked at all (its size alone is read).
                    {"name": "tooLong", "expression": f"size(variables.target) == 1 && {size_of.format('command')} + "
                                                      f"{size_of.format('args')} > {MAX_ARGV_TOKENS}"},
                    {"name": "command", "expression": f"size(variables.target) != 1 || variables.tooLong ? [] : "
                                                      f"{field.format('command')}"},
                    {"name": "argv", "expression": f"size(variables.target) != 1 || variables.tooLong ? [] : "
                                                   f"variables.command + "
                                                   f"{field.format('args')}"},
                    {"name": "engine", "expression": engine},
                    {"name": "read", "expression": _spellings("variables.engine", None, "read")},
                    {"name": "located", "expression": _spellings("variables.engine", None, "located")},
                    {"name": "dottedRead", "expression": _spellings("variables.engine", None, "dotted_read")},
                    {"name": "dottedLocated", "expression": _spellings("variables.engine", None, "dotted_located")},
                    {"name": "cut", "expression": cut},
                    {"name": "webhook", "expression": f"!({decided}) ? -1 : {webhook}"},
                    {"name": "own", "expression": f"!({decided}) ? -1 : {own}"}],
                   [{"expression": "variables.own < 0", "messageExpression": message,
                     "message": "a Pod or Pod template that opts into KV cache injection passes --kv-cache-dtype "
                                "itself, which the upgraded webhook refuses: remove it (kubectl kvdtype find-flags)",
                     "reason": "Forbidden"}])


def bindings_policy() -> dict:
    """A new Binding declaring ``auto``; a Binding whose dtype no recorded release accepts."""
    accepted = sorted(_engine_spellings.recorded_dtypes())
    dtype = "object.spec.domain.dtype"
    has_dtype = f"has(object.spec) && has(object.spec.domain) && has({dtype}) && type({dtype}) == string"
    named = ", ".join(_records.ENGINES)
    return _policy(BINDINGS, [{"apiGroups": ["worker.gpustack.ai"], "apiVersions": ["*"], "operations": ["CREATE"],
                               "resources": ["kvcachepoolbindings"]}],
                   [], [{"name": "dtype", "expression": f"{has_dtype} ? {dtype} : ''"}],
                   [{"expression": "variables.dtype != 'auto'",
                     "messageExpression": f"'KVCachePoolBinding ' + {_REF} + ' declares dtype auto, which the "
                                          "gpustack-operator refuses on a new Binding after the upgrade: name the "
                                          "dtype its engines run (kubectl kvdtype check)'",
                     "message": "a new KVCachePoolBinding declares dtype auto, refused after the upgrade",
                     "reason": "Forbidden"},
                    {"expression": f"variables.dtype == '' || variables.dtype in {_list(accepted)}",
                     "messageExpression": f"'KVCachePoolBinding ' + {_REF} + ' declares dtype ' + "
                                          f"{_shown('variables.dtype')} + ', which no recorded release of {named} "
                                          "accepts: every consumer would fail at startup after the upgrade, and the "
                                          "field is immutable: declare a dtype its engines accept (kubectl kvdtype "
                                          "check names one)'",
                     "message": f"a KVCachePoolBinding declares a dtype no recorded release of {named} accepts",
                     "reason": "Invalid"}])


def _policy(name: str, rules: list[dict], conditions: list[dict], variables: list[dict],
            validations: list[dict]) -> dict:
    spec: dict = {"failurePolicy": FAILURE_POLICY, "matchConstraints": {"resourceRules": rules}}
    if conditions:
        spec["matchConditions"] = conditions
    spec["variables"] = variables
    spec["validations"] = validations
    return {"apiVersion": API_VERSION, "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name}, "spec": spec}


def policies() -> list[dict]:
    """The three policies, as the records in force for the run write them (metadata not stamped yet)."""
    return [roles_policy(), pods_policy(), bindings_policy()]


def tables_named() -> list[str]:
    """The added engine table files the rules were written with (the plan names them)."""
    return list(_engine_spellings.tables_in_force())


def fingerprint(specs: Sequence[dict]) -> str:
    """What identifies the rules: a digest of the policies' specs (the records and reader they come from).
    ``hashlib`` is imported here: check and preflight import this module and need a digest only when a
    guard is installed (its import is a few milliseconds of every small run)."""
    import hashlib

    text = json.dumps([p["spec"] for p in specs], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def manifests(enforce: bool) -> list[dict]:
    """The policies and their bindings, stamped: the label the guard is found by, the plugin's
    version, the rules' fingerprint and the added tables; ``enforce``: Deny in place of Warn, Audit."""
    made = policies()
    stamp = {"labels": {MANAGED_LABEL: FIELD_MANAGER},
             "annotations": {VERSION_ANNOTATION: __version__, RECORDS_ANNOTATION: fingerprint(made),
                             TABLES_ANNOTATION: ",".join(_engine_spellings.tables_in_force())}}
    out = []
    for policy in made:
        policy["metadata"].update(json.loads(json.dumps(stamp)))
        out.append(policy)
    for policy in made:
        name = policy["metadata"]["name"]
        out.append({"apiVersion": API_VERSION, "kind": "ValidatingAdmissionPolicyBinding",
                    "metadata": {"name": name, **json.loads(json.dumps(stamp))},
                    "spec": {"policyName": name, "validationActions": list(DENY if enforce else WARN)}})
    return out
