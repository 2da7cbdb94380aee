"""The dry run of the upgrade (``_upgrade``), in process: the rendered argv and each predicted outcome."""

from __future__ import annotations

import itertools

import pytest

from kubectl_kvdtype._engines import verdicts as _verdicts
from kubectl_kvdtype._judging import upgrade as _upgrade
from kubectl_kvdtype._sources import model as _model

pytestmark = pytest.mark.version_sensitive  # argparse, the argv reader, completion or the man page (test_tiers.py)


def _deployment(engine="vLLM", version="0.29.0", extra=(), command=None, binding="chat") -> dict:
    role = {"name": "server", "kind": "Server", "replicas": 2, "extraArgs": list(extra)}
    if command:
        role["command"] = list(command)
    return {"metadata": {"name": "qwen", "namespace": "team-a"},
            "spec": {"model": {"name": "Qwen/Qwen3-8B"}, "engine": {"name": engine, "version": version},
                     "kvCache": {"poolRef": {"name": binding}}, "roles": [role]}}


def _role(dtype: str, **kwargs) -> _upgrade.Prediction:
    deployment = _deployment(**kwargs)
    return _upgrade.predict_role(deployment, _model.roles_of(deployment)[0], {("team-a", "chat"): dtype})


def _pod(args, engine="vLLM", injected=True, containers=None, command=("vllm", "serve", "Qwen/Qwen3-8B")) -> dict:
    annotations = {"kvcache.gpustack.ai/binding": "chat", "kvcache.gpustack.ai/engine": engine}
    if injected:
        annotations["kvcache.gpustack.ai/injected"] = '{"binding":"chat"}'
    return {"metadata": {"name": "worker-0", "namespace": "team-a", "labels": {"kvcache.gpustack.ai/inject": "true"},
                         "annotations": annotations},
            "spec": {"containers": containers or [{"name": "main", "command": list(command), "args": list(args)}]}}


def test_the_operator_argv_base_dtype_extra_args_then_host_and_port():
    deployment = _deployment(extra=["--max-model-len=4096"])
    assert _upgrade.rendered_role_argv(deployment, _model.roles_of(deployment)[0], "bfloat16") == [
        "vllm", "serve", "Qwen/Qwen3-8B", "--kv-cache-dtype", "bfloat16", "--max-model-len=4096",
        "--host", "0.0.0.0", "--port", "8000"]
    sglang = _deployment(engine="SGLang", version="0.5.18", extra=["--port=9000"])
    assert _upgrade.rendered_role_argv(sglang, _model.roles_of(sglang)[0], "bf16") == [
        "python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--enable-metrics",
        "--kv-cache-dtype", "bf16", "--port=9000", "--host", "0.0.0.0"]  # the role's own port is kept


def test_starts_with_the_binding_dtype():
    prediction = _role("bfloat16")
    assert (prediction.outcome, prediction.runs, prediction.text) == (_upgrade.STARTS, "bfloat16",
                                                                      "starts with bfloat16")
    assert prediction.replicas == 2


@pytest.mark.parametrize("engine,version,dtype,outcome", [
    ("vLLM", "0.29.0", "bf16", _upgrade.FAILS),  # vLLM has no bf16
    ("SGLang", "0.5.18", "bf16", _upgrade.STARTS),
    ("SGLang", "0.5.18", "fp8", _upgrade.FAILS),  # vLLM's fp8 is not an SGLang spelling
    ("vLLM", "0.17.0", "float16", _upgrade.FAILS),  # float16 from 0.18.0
    ("vLLM", "0.18.0", "float16", _upgrade.STARTS),
])
def test_each_engine_and_version_reads_the_spelling_its_own_way(engine, version, dtype, outcome):
    assert _role(dtype, engine=engine, version=version).outcome == outcome


def test_a_rejected_spelling_fails_with_the_engines_own_words():
    prediction = _role("bf16")
    assert prediction.text == "fails: invalid choice 'bf16'"
    assert "argument --kv-cache-dtype: invalid choice: 'bf16'" in prediction.error
    assert not prediction.fails_anyway and prediction.broken


def test_vllm_033_refuses_the_value_at_engine_start_not_in_its_parser():
    prediction = _role("bf16", version="0.33.0")
    assert prediction.outcome == _upgrade.FAILS and prediction.text.startswith("fails at engine start")


def test_the_roles_own_copy_wins_only_when_the_binding_spelling_is_valid():
    own = _role("bfloat16", extra=["--kv-cache-dtype", "fp8_e4m3"])
    assert own.outcome == _upgrade.OWN_COPY and own.runs == "fp8_e4m3"
    assert own.text.startswith("starts, but with its own fp8_e4m3 (the role's copy wins)")
    # The operator's copy comes first: a rejected one ends the process before the role's is read.
    rejected = _role("bf16", extra=["--kv-cache-dtype", "fp8_e4m3"])
    assert rejected.outcome == _upgrade.FAILS and "'bf16'" in rejected.text
    same = _role("bfloat16", extra=["--kv-cache-dtype=bfloat16"])
    assert same.outcome == _upgrade.OWN_COPY and same.text.startswith("starts with bfloat16, which the role also")


def test_a_failure_the_upgrade_does_not_cause_is_marked():
    prediction = _role("bfloat16", extra=["--no-such-option"])
    assert prediction.outcome == _upgrade.FAILS and prediction.fails_anyway
    assert prediction.text == "fails: unrecognized arguments: --no-such-option (whatever the dtype)"


def test_take_over_roles_unknown_engines_and_missing_bindings():
    assert _role("bf16", command=["vllm", "serve", "m"]).outcome == _upgrade.UNCHANGED
    assert _role("bf16", engine="TensorRT-LLM").outcome == _upgrade.NOT_JUDGED
    missing = _role("bf16", binding="gone")
    assert missing.outcome == _upgrade.NO_BINDING and "'gone'" in missing.text
    deployment = _deployment()
    no_dtype = _upgrade.predict_role(deployment, _model.roles_of(deployment)[0], {("team-a", "chat"): None})
    assert no_dtype.outcome == _upgrade.UNSURE


def test_an_injected_pod_gets_the_dtype_appended_in_place_of_the_webhooks_copy():
    pod = _pod(["--max-model-len=4096", "--kv-cache-dtype", "fp8_e4m3"])
    container = _model.target_container(pod, _model.pod_spec(pod))
    assert _upgrade.rendered_pod_argv(pod, container, "bfloat16") == (
        ["vllm", "serve", "Qwen/Qwen3-8B"], ["--max-model-len=4096", "--kv-cache-dtype", "bfloat16"])
    prediction = _upgrade.predict_pod(pod, {("team-a", "chat"): "bfloat16"})
    assert (prediction.outcome, prediction.runs) == (_upgrade.STARTS, "bfloat16")
    assert _upgrade.predict_pod(pod, {("team-a", "chat"): "bf16"}).outcome == _upgrade.FAILS


def test_a_pod_passing_the_flag_itself_is_refused_at_admission():
    pod = _pod(["--kv-cache-dtype", "fp8", "--kv-cache-dtype", "fp8"])  # its own, then the webhook's
    prediction = _upgrade.predict_pod(pod, {("team-a", "chat"): "fp8"})
    assert prediction.outcome == _upgrade.REFUSED and prediction.text.startswith("refused at admission")
    not_injected = _pod(["--kv-cache-dtype", "fp8"], injected=False)  # no webhook copy: it is the Pod's own
    assert _upgrade.predict_pod(not_injected, {("team-a", "chat"): "fp8"}).outcome == _upgrade.REFUSED


def test_a_pod_passing_the_flag_in_a_form_its_engine_does_not_read_is_admitted_and_fails():
    """The webhook refuses the flag in the spellings the Pod's engine reads as it (at the reference
    release: a Pod declares no version); any other form is no flag to it, so the Pod is created and
    its engine fails at startup."""
    for engine, args in (("SGLang", ["--kv_cache_dtype", "fp8_e4m3"]),  # SGLang reads no underscores
                         ("vLLM", ["--kv-cache-dt=fp8_e4m3"])):  # ambiguous from vLLM 0.19
        pod = _pod(args, engine=engine, injected=False,
                   command=("python3", "-m", "sglang.launch_server", "--model-path", "m") if engine == "SGLang"
                   else ("vllm", "serve", "m"))
        prediction = _upgrade.predict_pod(pod, {("team-a", "chat"): "bfloat16"})
        assert prediction.outcome == _upgrade.FAILS, (engine, prediction.text)
        assert prediction.fails_anyway  # not the dtype's doing: the form itself
    read = _pod(["--kv-cache-dt=fp8_e4m3"], engine="SGLang", injected=False,  # an abbreviation SGLang expands
                command=("python3", "-m", "sglang.launch_server", "--model-path", "m"))
    assert _upgrade.predict_pod(read, {("team-a", "chat"): "bfloat16"}).outcome == _upgrade.REFUSED


def test_a_pod_of_another_engine_passing_the_flag_is_refused_as_find_flags_says():
    """The webhook reads another engine's Pod as any engine would (find-flags reports its copy):
    refused, not "not judged"; without a copy it is not judged."""
    for engine in ("TensorRT-LLM", ""):
        pod = _pod(["--kv_cache_dt=fp8"], engine=engine, injected=False)  # vLLM 0.18's reading of it
        assert _upgrade.predict_pod(pod, {("team-a", "chat"): "bfloat16"}).outcome == _upgrade.REFUSED, engine
        assert _upgrade.predict_pod(_pod([], engine=engine), {("team-a", "chat"): "bfloat16"}).outcome == \
            _upgrade.NOT_JUDGED


def test_a_pod_with_several_containers_and_no_target_is_unsure():
    pod = _pod([], containers=[{"name": "a", "args": []}, {"name": "b", "args": []}])
    assert _upgrade.predict_pod(pod, {("team-a", "chat"): "fp8"}).outcome == _upgrade.UNSURE


def test_predict_covers_attached_roles_and_opted_in_pods_only():
    detached = _deployment()
    del detached["spec"]["kvCache"]
    opted_out = _pod([])
    opted_out["metadata"]["labels"] = {}
    bindings = [{"metadata": {"name": "chat", "namespace": "team-a"}, "spec": {"domain": {"dtype": "fp8_e4m3"}}}]
    found = _upgrade.predict([_deployment(), detached], [_pod([]), opted_out], bindings)
    assert [(p.kind, p.outcome) for p in found] == [("ModelDeployment", "starts"), ("Pod", "starts")]
    assert _upgrade.counts(found) == {"starts": 2}


_SPELLINGS = ("bfloat16", "bf16", "fp8", "fp8_e4m3", "fp8_e5m2", "float16", "nvfp4", "auto", "mxfp8")
_EXTRAS = ((), ("--kv-cache-dtype", "fp8_e4m3"), ("--kv_cache_dtype=fp8_e5m2",), ("--max-model-len=4096",))


@pytest.mark.parametrize("engine,version", [("vLLM", "0.18.0"), ("vLLM", "0.29.0"), ("SGLang", "0.5.18")])
def test_the_exact_reader_and_the_flag_reader_agree_on_the_rendered_argv(engine, version):
    """Two readers, one answer: the argparse rebuilt from the recorded tables (what the dry run
    uses) and ``_engines.verdicts.read_flag`` (what check/find-flags/verify use), on every rendered argv
    whose spellings the tables know."""
    for dtype, extra in itertools.product(_SPELLINGS, _EXTRAS):
        prediction = _role(dtype, engine=engine, version=version, extra=extra)
        deployment = _deployment(engine=engine, version=version, extra=extra)
        argv = _upgrade.rendered_role_argv(deployment, _model.roles_of(deployment)[0], dtype)
        reading = _verdicts.read_flag([("command", argv)], engine, version)
        if reading.state == _verdicts.UNSURE or prediction.fails_anyway:
            # a spelling the table does not know; an option this engine lacks (the flag reader reads only the flag)
            continue
        assert (prediction.outcome == _upgrade.FAILS) == (reading.state == _verdicts.FAILED), (dtype, extra)
        if reading.state == _verdicts.VALUE:
            assert prediction.runs == reading.value, (dtype, extra)
