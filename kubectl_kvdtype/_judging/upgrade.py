"""A dry run of the upgrade: what each pool-attached role and injected Pod will do once it is in.

For every managed role of a pool-attached ModelDeployment this builds the argv the upgraded
operator renders (base command, the Binding's dtype as ``--kv-cache-dtype``, the role's
``extraArgs``, then ``--host``/``--port`` unless the role passed them); for every Pod opted into
injection, the argv its next incarnation gets from the webhook (its own ``command``/``args``, the
dtype appended to ``args``). Each argv is then put to the one question every subcommand asks
(``_engines.verdicts.read_flag``: what the engine at that version makes of it, through a real argparse built
from the engines' recorded option tables, vLLM 0.33+ refusing a value at engine start rather than
in its parser). The result is plain data, one ``Prediction`` per role or Pod; the subcommands word
it.

The operator's connector arguments other than the dtype (``--kv-transfer-config`` on vLLM) are not
rendered here: they do not change how ``--kv-cache-dtype`` is read.
"""

from __future__ import annotations

import functools
import re
from typing import Iterable, Optional

from kubectl_kvdtype._engines import records as _records
from kubectl_kvdtype._engines import verdicts as _verdicts
from kubectl_kvdtype._kits.memo import memoized
from kubectl_kvdtype._kits.records import field, record_type
from kubectl_kvdtype._kits.report import FieldPath
from kubectl_kvdtype._sources import model as _model

FLAG = _records.FLAG
MODEL_DEPLOYMENT, POD = "ModelDeployment", "Pod"

#: ``Prediction.outcome``: what the replica does after the upgrade.
STARTS = "starts"  # runs the Binding's dtype
OWN_COPY = "own-copy"  # runs, with the role's (or Pod's) own later copy of the flag
FAILS = "fails"  # the engine exits at startup
REFUSED = "refused"  # the admission webhook refuses the Pod at creation
UNSURE = "unsure"  # this tool cannot say (a spelling its tables do not list, a value set from outside)
NOT_JUDGED = "not-judged"  # an engine that is neither vLLM nor SGLang
NO_BINDING = "no-binding"  # the Binding named does not exist (or declares no dtype)
UNCHANGED = "unchanged"  # a take-over role: the operator renders nothing into it

#: Outcomes that stop a replica from serving once the upgrade is in.
BROKEN = (FAILS, REFUSED, NO_BINDING)

HOST_PORT = ("--host", "0.0.0.0", "--port", "8000")
#: A dtype every version of both engines accepts: the same argv rendered with it tells a failure
#: the Binding's dtype causes from one the rest of the argv causes.
CONTROL_DTYPE = "auto"


@record_type(frozen=True)
class Prediction:
    """What one role (all its replicas) or one injected Pod does after the upgrade."""

    kind: str  # MODEL_DEPLOYMENT | POD
    namespace: str
    name: str
    role: Optional[str]  # the role (ModelDeployment), None for a Pod
    container: Optional[str]  # the target container (Pod), None for a role
    engine: Optional[str]  # as declared
    engine_version: Optional[str]
    binding: str
    dtype: Optional[str]  # the Binding's dtype, None when unknown
    replicas: int
    outcome: str
    text: str  # "starts with bfloat16", "fails: invalid choice 'bf16'"
    runs: Optional[str] = None  # the dtype the engine runs, when it starts
    error: str = ""  # the engine's own error text when it fails
    #: Whether the same argv with ``auto`` (which every engine version accepts) in place of the
    #: Binding's dtype fails too: a failure the dtype does not cause (an option the engine lacks).
    fails_anyway: bool = False
    argv: tuple[str, ...] = field(default=())
    #: The role's or target container's name in its object (``Finding.field_path``).
    field_path: Optional[FieldPath] = None

    @property
    def broken(self) -> bool:
        return self.outcome in BROKEN

    def to_dict(self) -> dict:
        return {"kind": self.kind, "namespace": self.namespace, "name": self.name, "role": self.role,
                "container": self.container, "engine": self.engine, "engineVersion": self.engine_version,
                "binding": self.binding or None, "dtype": self.dtype, "replicas": self.replicas,
                "outcome": self.outcome, "prediction": self.text, "runs": self.runs, "error": self.error or None,
                "failsAnyway": self.fails_anyway, "argv": list(self.argv)}


def predict(deployments: Iterable[dict], pods: Iterable[dict], bindings: Iterable[dict]) -> list[Prediction]:
    """One Prediction per role of every pool-attached deployment, and per Pod opted into injection."""
    dtypes = {(_model.namespace_of(b), _model.name_of(b)): _model.binding_dtype(b) for b in bindings}
    found: list[Prediction] = []
    for deployment in deployments:
        if _model.is_pool_attached(deployment):
            found += [predict_role(deployment, role, dtypes) for role in _model.roles_of(deployment)]
    for pod in pods:
        if _model.opts_in(_model.labels_of(pod)):
            found.append(predict_pod(pod, dtypes))
    return found


# --- Roles ------------------------------------------------------------------------------------

def rendered_role_argv(deployment: dict, role: dict, dtype: str) -> list[str]:
    """The container command the upgraded operator builds for a managed role (the base command
    from the engine's record; none for an engine this tool does not know)."""
    engine = _model.deployment_engine(deployment).name
    return _rendered(engine, _model_name(deployment), _model.role_extra_args(role), dtype)


def _model_name(deployment: dict) -> str:
    return _model.text(_model.dig(deployment, "spec", "model", "name")) or ""


def _rendered(engine: Optional[str], model: str, extra: list[str], dtype: str) -> list[str]:
    base = _records.record(engine).command(model) if engine is not None else []
    tail = []
    for option, value in zip(HOST_PORT[::2], HOST_PORT[1::2], strict=True):
        if not any(arg == option or arg.startswith(option + "=") for arg in extra):
            tail += [option, value]
    return [*base, FLAG, dtype, *extra, *tail]


def predict_role(deployment: dict, role: dict, dtypes: dict) -> Prediction:
    engine = _model.deployment_engine(deployment)
    namespace = _model.namespace_of(deployment)
    binding = _model.deployment_binding(deployment) or ""
    dtype = dtypes.get((namespace, binding))
    prediction = functools.partial(
        Prediction, kind=MODEL_DEPLOYMENT, namespace=namespace, name=_model.name_of(deployment),
        role=_model.role_name(role), container=None, engine=engine.name or engine.declared,
        engine_version=engine.version, binding=binding, dtype=dtype, replicas=_model.role_replicas(role),
        field_path=_model.named(_model.role_path(deployment, role)))
    if _model.role_is_takeover(role):
        return prediction(outcome=UNCHANGED,
                          text="unchanged: a take-over role (command set), the operator renders nothing into it")
    missing = _missing(binding, namespace, dtypes)
    if missing:
        return prediction(outcome=missing[0], text=missing[1])
    assert dtype, "_missing answers for a Binding without a dtype"
    if engine.name is None:
        return prediction(outcome=NOT_JUDGED, text=_not_judged(engine))
    outcome, argv = _role_outcome(engine.name, engine.version, _model_name(deployment),
                                  tuple(_model.role_extra_args(role)), dtype)
    return prediction(**outcome, argv=argv)


@memoized(maxsize=4096)
def _role_outcome(name: str, version: Optional[str], model: str, extra: tuple[str, ...],
                  dtype: str) -> tuple[dict, tuple[str, ...]]:
    """(outcome fields, rendered argv) of a managed role; memoized: a cluster's roles repeat a few
    engines, models, extraArgs and dtypes, and reading each rendered argv twice through the
    engine's parser was most of a 10,000-deployment preflight's prediction. The fields are
    unpacked into each Prediction, never changed."""
    argv = _rendered(name, model, list(extra), dtype)
    own = [o for o in _verdicts.find_in_fields([("extraArgs", list(extra))], name, version) if o.read]
    at = argv.index(FLAG)
    control = _read(name, version, [*argv[:at], FLAG, CONTROL_DTYPE, *argv[at + 2:]], [])
    return _outcome(name, _read(name, version, argv, []), dtype, bool(own), "role", control), tuple(argv)


# --- Injected Pods ----------------------------------------------------------------------------

def rendered_pod_argv(pod: dict, container: dict, dtype: str) -> tuple[list[str], list[str]]:
    """(command, args) the webhook gives the Pod's next incarnation: its own args, the dtype appended.

    A Pod the webhook injected already carries the webhook's copy (the last one in ``args``); that
    copy is the webhook's, not the Pod's, so it is replaced, not kept.
    """
    engine = _model.pod_engine(pod)
    command, args = _model.argv_of(container, "command"), _model.argv_of(container, "args")
    webhook = _model.webhook_copy(pod, _model.container_flags(container, engine))
    if webhook is not None:
        width = 1 if "=" in webhook.token or webhook.value is None else 2
        args = args[:webhook.index] + args[webhook.index + width:]
    return command, [*args, FLAG, dtype]


def predict_pod(pod: dict, dtypes: dict) -> Prediction:
    engine = _model.pod_engine(pod)
    namespace = _model.namespace_of(pod)
    binding = _model.pod_binding(pod) or ""
    dtype = dtypes.get((namespace, binding))
    container = _model.target_container(pod, _model.pod_spec(pod))
    prediction = functools.partial(
        Prediction, kind=POD, namespace=namespace, name=_model.name_of(pod), role=None,
        container=_model.text((container or {}).get("name")), engine=engine.name or engine.declared,
        engine_version=None, binding=binding, dtype=dtype, replicas=1,
        field_path=_model.named(_model.container_path(_model.POD_SPEC_PATH, _model.pod_spec(pod), container)))
    missing = _missing(binding, namespace, dtypes)
    if missing:
        return prediction(outcome=missing[0], text=missing[1])
    assert dtype, "_missing answers for a Binding without a dtype"
    if container is None:
        return prediction(outcome=UNSURE,
                          text="unsure: several containers and no kvcache.gpustack.ai/container annotation "
                               "naming the one the webhook injects")
    found = _model.container_flags(container, engine)  # another or no engine: any engine's reading
    webhook = _model.webhook_copy(pod, found)
    if any(o is not webhook and o.read for o in found):  # a form the engine does not read is not the flag:
        return prediction(outcome=REFUSED,                # admitted, it fails at startup (rendered below)
                          text="refused at admission: the Pod passes the flag itself, so its next incarnation "
                               "is not created")
    if engine.name is None:
        return prediction(outcome=NOT_JUDGED, text=_not_judged(engine))
    name = engine.name
    command, args = rendered_pod_argv(pod, container, dtype)
    env = container.get("env")
    control = _read(name, engine.version, command, [*args[:-1], CONTROL_DTYPE], env)
    outcome = _outcome(name, _read(name, engine.version, command, args, env), dtype, False, "Pod", control)
    return prediction(**outcome, argv=tuple(command + args))


# --- Reading the rendered argv ----------------------------------------------------------------

def _read(engine: str, version: Optional[str], command: list[str], args: list[str],
          env: object = None) -> _verdicts.FlagReading:
    return _verdicts.read_flag([("command", command), ("args", args)], engine, version, env)


_INVALID_CHOICE = re.compile(r"invalid choice: ('[^']*')")


def _outcome(engine: str, reading: _verdicts.FlagReading, dtype: str, own: bool, holder: str,
             control: _verdicts.FlagReading) -> dict:
    """The outcome fields of a Prediction from what the engine makes of the rendered argv
    (``control``: the same argv rendered with ``auto``); a version no recorded parser covers is
    named in the text."""
    outcome = _outcome_of(engine, reading, dtype, own, holder, control)
    if reading.note:
        outcome["text"] += f" ({reading.note})"
    return outcome


def _outcome_of(engine: str, reading: _verdicts.FlagReading, dtype: str, own: bool, holder: str,
                control: _verdicts.FlagReading) -> dict:
    if reading.state == _verdicts.FAILED and reading.stage == _verdicts.AT_START:
        return {"outcome": FAILS, "text": f"fails at engine start: {reading.reason}", "error": reading.reason}
    if reading.state == _verdicts.FAILED:
        error = reading.error.removeprefix("error: ")
        choice = _INVALID_CHOICE.search(error)
        why = f"invalid choice {choice.group(1)}" if choice else error
        anyway = control.state == _verdicts.FAILED
        return {"outcome": FAILS, "text": f"fails: {why}" + (" (whatever the dtype)" if anyway else ""),
                "error": error, "fails_anyway": anyway}
    if reading.state == _verdicts.UNSURE and reading.value is None:  # set from outside the object
        return {"outcome": UNSURE, "text": f"unsure: the value {reading.reason}"}
    if reading.state == _verdicts.UNSURE:  # a spelling no recorded parser or table entry decides
        value = reading.value
        return {"outcome": UNSURE, "runs": value,
                "text": f"unsure: starts with {value} only if {engine} accepts it ({reading.reason})"}
    if reading.state == _verdicts.ABSENT:  # the rendered flag is not where the engine reads it (a shell script)
        return {"outcome": UNSURE, "text": "unsure: the engine does not read the rendered flag from this argv"}
    value = reading.value or ""
    if own and value != dtype:
        return {"outcome": OWN_COPY, "runs": value,
                "text": f"starts, but with its own {value} (the {holder}'s copy wins); its next edit is refused "
                        "at admission until the flag is removed"}
    if own:
        return {"outcome": OWN_COPY, "runs": value,
                "text": f"starts with {value}, which the {holder} also passes itself; its next edit is refused "
                        "at admission until the flag is removed"}
    return {"outcome": STARTS, "runs": value, "text": f"starts with {value}"}


def _missing(binding: str, namespace: str, dtypes: dict) -> Optional[tuple[str, str]]:
    """(outcome, text) when there is no dtype to render; None when there is one."""
    if (namespace, binding) not in dtypes:
        named = f"Binding {binding!r}" if binding else "no Binding"
        return NO_BINDING, f"no dtype to render: it names {named}, which does not exist in namespace {namespace}"
    if not dtypes[(namespace, binding)]:
        return UNSURE, f"unsure: its Binding {binding} declares no spec.domain.dtype"
    return None


def _not_judged(engine: _model.EngineInfo) -> str:
    if engine.declared:
        return f"not judged: engine {engine.declared!r} is neither vLLM nor SGLang"
    return "not judged: no engine declared"


def counts(predictions: Iterable[Prediction]) -> dict:
    """{outcome: number of roles/Pods}, for summaries."""
    found: dict[str, int] = {}
    for prediction in predictions:
        found[prediction.outcome] = found.get(prediction.outcome, 0) + 1
    return found
