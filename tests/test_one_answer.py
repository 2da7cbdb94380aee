"""One answer about an engine, asked the same way by every subcommand (docs/engines.md, "One
question, one answer").

The cases of issue 27 through real kubectl against the fake API server, then a property test that
drives the four report builders in process over generated Bindings, deployments, roles and replica
Pods and checks the mapping written in docs/engines.md.
"""

from __future__ import annotations

from typing import Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _support import codes, kvdtype, report, seed
from kubectl_kvdtype._engines import records as _records
from kubectl_kvdtype._engines import verdicts as _verdicts
from kubectl_kvdtype._judging import bindings as _bindings
from kubectl_kvdtype._judging import readiness as preflight
from kubectl_kvdtype._judging import replicas as verify
from kubectl_kvdtype._judging import upgrade as _upgrade
from kubectl_kvdtype._judging.flags import FlagInventory, build_find_flags_report
from kubectl_kvdtype._sources import model as _model
from test_verdicts import SETTING_ON, binding, deployment

pytestmark = pytest.mark.version_sensitive  # the argv reader (test_tiers.py)

LOOKALIKES = ["BFLOAT16", "bflo\u0430t16", "bfloat16 ", "bfloat16\u200b"]  # the third: a Cyrillic a


def _check_and_preflight(env: dict) -> tuple[dict, dict, int, int]:
    checked, flighted = kvdtype(env, "check", "-A", "-o", "json"), kvdtype(env, "preflight", "-A", "-o", "json")
    return report(checked), report(flighted), checked.returncode, flighted.returncode


def _outcomes(document: dict) -> dict[str, str]:
    return {row["name"]: row["outcome"] for row in document["predictions"]}


def test_team_b_turboquant_check_and_preflight_agree(cluster):
    checked, flighted, _, _ = _check_and_preflight(cluster)
    turbo = next(item for item in checked["items"] if item["name"] == "turbo")
    assert turbo["verdict"] == "rejected"  # vLLM 0.29.0's recorded parser has turboquant_4bit_nc, not this
    assert ("dtype-rejected", "team-b/turbo") in codes(checked)
    assert ("dtype-unknown", "team-b/turbo") not in codes(checked)
    assert _outcomes(flighted)["qwen3-turbo"] == "fails"
    assert ("dtype-rejected", "team-b/turbo") in codes(flighted)


def test_a_spelling_only_the_recording_lists_is_accepted(fake, kube_env):
    seed(fake, [SETTING_ON, binding("t", "k8v4", "turboquant_k8v4"),
                deployment("t", "uses-k8v4", "k8v4", "vLLM", "0.29.0")])
    checked, flighted, status, _ = _check_and_preflight(kube_env)
    assert checked["items"][0]["verdict"] == "ok" and status == 0
    assert _outcomes(flighted) == {"uses-k8v4": "starts"}


def test_lookalike_spellings_are_rejected_by_check_as_by_preflight(fake, kube_env):
    objects: list[dict] = [SETTING_ON]
    for index, dtype in enumerate(LOOKALIKES):
        objects += [binding("look", f"b{index}", dtype), deployment("look", f"d{index}", f"b{index}", "vLLM", "0.29.0")]
    seed(fake, objects)
    checked, flighted, check_status, preflight_status = _check_and_preflight(kube_env)
    assert {item["dtype"]: item["verdict"] for item in checked["items"]} == dict.fromkeys(LOOKALIKES, "rejected")
    assert check_status == 1 and preflight_status == 1 and flighted["summary"]["verdict"] == "NO-GO"
    assert set(_outcomes(flighted).values()) == {"fails"}


def test_a_release_candidate_is_judged_before_its_release_by_both(fake, kube_env):
    seed(fake, [SETTING_ON, binding("rc", "legacy", "bf16"),
                deployment("rc", "candidate", "legacy", "vLLM", "0.33.0rc1")])
    checked, flighted, _, _ = _check_and_preflight(kube_env)
    rejected = [f for f in checked["findings"] if f["code"] == "dtype-rejected"]
    assert len(rejected) == 1 and "exits at argument parsing" in rejected[0]["message"]
    prediction = flighted["predictions"][0]
    assert prediction["outcome"] == "fails" and prediction["prediction"].startswith("fails: invalid choice 'bf16'")
    assert _records.parse_version("0.33.0rc1") < _records.parse_version("0.33.0")


#: Each version, and the pieces of its note (no apostrophe: YAML may double it), which every format holds.
NEWER = {"vLLM": ("0.34.0", ("vLLM 0.34.0 is newer than the newest recorded release: the spelling judged by this",
                             "spelling table at 0.34.0, the argv read by vLLM 0.33.0")),
         "SGLang": ("0.5.24", ("SGLang 0.5.24 is newer than the newest recorded release: the spelling judged by this",
                               "spelling table at 0.5.24, the argv read by SGLang 0.5.23"))}


@pytest.mark.parametrize("output", ["table", "json", "yaml", "junit", "sarif"])
def test_a_version_newer_than_every_recording_is_named_in_every_format(fake, kube_env, output):
    seed(fake, [SETTING_ON, binding("new", "chat", "bfloat16"),
                deployment("new", "vl", "chat", "vLLM", NEWER["vLLM"][0]),
                deployment("new", "sg", "chat", "SGLang", NEWER["SGLang"][0])])
    for subcommand in ("check", "preflight", "verify"):
        result = kvdtype(kube_env, subcommand, "-A", "-o", output)
        assert result.returncode == 0, result.stderr
        text = " ".join(result.stdout.split())  # the table wraps nothing, but keep it layout-blind
        for _, pieces in NEWER.values():
            assert all(piece in text for piece in pieces), (subcommand, output, result.stdout)


def test_preflight_lists_an_unrecorded_version_as_a_look_item(fake, kube_env):
    seed(fake, [SETTING_ON, binding("new", "chat", "bfloat16"), deployment("new", "vl", "chat", "vLLM", "0.34.0")])
    flighted = report(kvdtype(kube_env, "preflight", "-A", "-o", "json"))
    looks = [item for item in flighted["items"] if item["action"] == "look"]
    assert [item["codes"] for item in looks] == [["engine-version-unrecorded"]]
    assert all(piece in looks[0]["what"] for piece in NEWER["vLLM"][1])
    assert all(piece in flighted["predictions"][0]["prediction"] for piece in NEWER["vLLM"][1])


def test_the_upgrade_renders_the_base_command_of_the_engine_records():
    for record in _records.RECORDS:
        dep = deployment("ns", "d", "b", record.name, None)
        argv = _upgrade.rendered_role_argv(dep, _model.roles_of(dep)[0], "auto")
        assert argv[:len(record.base_command)] == record.command("Qwen/Qwen3-8B")
        assert "Qwen/Qwen3-8B" in argv and "{model}" not in argv
    assert not hasattr(_upgrade, "VLLM_BASE") and not hasattr(_upgrade, "SGLANG_BASE")


# --- The mapping, over generated objects --------------------------------------------------

VERSIONS = {
    "vLLM": ["0.11.0", "0.18.0", "0.19.0", "0.27.1", "0.29.0", "v0.29.0", "0.29.0-cu124", "0.33.0rc1", "0.33.0",
             "0.34.0", "latest", None],
    "SGLang": ["0.5.4", "0.5.18", "v0.5.18.post1", "0.5.21", "0.5.23", "0.5.24", None],
}
DTYPES = ["bfloat16", "bf16", "fp8", "fp8_e4m3", "fp8_e5m2", "float16", "fp8_inc", "nvfp4", "mxfp8", "fp4_e2m1",
          "fp4_mx_block16", "nvfp4_4over6", "turboquant_4bit", "turboquant_k8v4", "fp8_per_token_head", "FP8", "half",
          *LOOKALIKES]
#: A role's extraArgs: nothing of its own, an unrelated option, its own copy of the flag (auto: every
#: version of both engines accepts it), an option its engine lacks.
EXTRAS = {"none": [], "unrelated": ["--trust-remote-code"], "own": ["--kv-cache-dtype", "auto"],
          "bad-option": ["--no-such-option"]}

#: docs/engines.md, "One question, one answer": (check's verdict for the consumer, the role's
#: extraArgs) -> (preflight's outcome for the role, verify's verdict on a replica running the
#: rendered argv). check's "rejected" is split by the stage its message names.
MAPPING = {
    ("ok", "none"): ("starts", "ok"), ("ok", "unrelated"): ("starts", "ok"),
    ("ok", "own"): ("own-copy", "mismatch"), ("ok", "bad-option"): ("fails", "rejected"),
    ("rejected at parsing", "none"): ("fails", "rejected"), ("rejected at parsing", "unrelated"): ("fails", "rejected"),
    ("rejected at parsing", "own"): ("fails", "rejected"), ("rejected at parsing", "bad-option"): ("fails", "rejected"),
    ("rejected at start", "none"): ("fails", "rejected"), ("rejected at start", "unrelated"): ("fails", "rejected"),
    # 0.33+ checks no choices in its parser: the role's later valid copy wins.
    ("rejected at start", "own"): ("own-copy", "mismatch"), ("rejected at start", "bad-option"): ("fails", "rejected"),
    ("unknown", "none"): ("unsure", "unknown"), ("unknown", "unrelated"): ("unsure", "unknown"),
    ("unknown", "own"): ("own-copy", "mismatch"), ("unknown", "bad-option"): ("fails", "rejected"),
}


@st.composite
def consumers(draw) -> list[tuple[str, Optional[str], str, str]]:
    """(engine, version, dtype, extraArgs kind) per deployment, each on a Binding of its own."""
    count = draw(st.integers(1, 4))
    found = []
    for _ in range(count):
        engine = draw(st.sampled_from(sorted(VERSIONS)))
        found.append((engine, draw(st.sampled_from(VERSIONS[engine])), draw(st.sampled_from(DTYPES)),
                      draw(st.sampled_from(sorted(EXTRAS)))))
    return found


@st.composite
def injected(draw) -> list[tuple[str, str]]:
    """(engine, dtype) per injected Pod, each on a Binding of its own (Pods declare no version)."""
    return draw(st.lists(st.tuples(st.sampled_from(sorted(VERSIONS)), st.sampled_from(DTYPES)), max_size=2))


def _injected_pod(index: int, engine: str, dtype: str) -> dict:
    """A Pod the webhook injected: its engine's command, the webhook's copy of the flag last in ``args``."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p{index}", "namespace": "gen", "labels": {_model.INJECT_LABEL: "true"},
                         "annotations": {_model.BINDING_ANNOTATION: f"pb{index}", _model.ENGINE_ANNOTATION: engine,
                                         _model.INJECTED_ANNOTATION: f'{{"binding": "pb{index}"}}'}},
            "spec": {"containers": [{"name": "main", "command": _records.record(engine).command("Qwen/Qwen3-8B"),
                                     "args": ["--kv-cache-dtype", dtype]}]}}


#: The same mapping for an injected Pod: check's verdict -> (preflight's outcome, verify's verdict).
POD_MAPPING = {"ok": ("starts", "ok"), "rejected at parsing": ("fails", "rejected"),
               "rejected at start": ("fails", "rejected"), "unknown": ("unsure", "unknown")}


def _replica(dep: dict, argv: list[str]) -> dict:
    name = _model.name_of(dep)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{name}-server-r0-m0", "namespace": "gen",
                         "labels": {"app.kubernetes.io/name": "model-deployment", "app.kubernetes.io/instance": name,
                                    "app.kubernetes.io/component": "server"}},
            "spec": {"containers": [{"name": "main", "command": argv}]}}


def _check_verdict(checked, name: str) -> str:
    item = next(i for i in checked.items if i["name"] == name)
    if item["verdict"] != "rejected":
        return item["verdict"]
    message = next(f.message for f in checked.findings if f.code == "dtype-rejected" and f.object.name == name)
    return "rejected at start" if "fails at engine start" in message else "rejected at parsing"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(consumers(), injected())
def test_check_preflight_verify_and_find_flags_give_one_answer(generated, generated_pods):
    bindings, deployments, replicas = [], [], []
    pods = [_injected_pod(index, engine, dtype) for index, (engine, dtype) in enumerate(generated_pods)]
    bindings += [binding("gen", f"pb{index}", dtype) for index, (_, dtype) in enumerate(generated_pods)]
    for index, (engine, version, dtype, extra) in enumerate(generated):
        bindings.append(binding("gen", f"b{index}", dtype))
        dep = deployment("gen", f"d{index}", f"b{index}", engine, version, EXTRAS[extra] or None)
        deployments.append(dep)
        replicas.append(_replica(dep, _upgrade.rendered_role_argv(dep, _model.roles_of(dep)[0], dtype)))
    flags = FlagInventory(deployments, bindings, pods)
    check_inventory = _bindings.BindingInventory(bindings, _bindings.consumers_of(deployments, pods), deployments,
                                                  SETTING_ON, None)
    checked = _bindings.build_check_report(check_inventory, "gpustack-system")
    flighted = preflight.build_report(check_inventory, flags, "gpustack-system")
    verified = verify.build_verify_report(verify.PodInventory(
        deployments, {("gen", _model.name_of(b)): b for b in bindings}, replicas, pods, SETTING_ON, None))
    found = build_find_flags_report(flags)
    outcomes = {row["name"]: row for row in flighted.sections[0].rows}
    verdicts = {item["deployment"] or item["name"]: item["verdict"] for item in verified.items}
    flagged = {f.object.name: f.message for f in found.findings if f.code == "role-flag"}
    for index, (engine, version, dtype, extra) in enumerate(generated):
        name, case = f"d{index}", (engine, version, dtype, extra)
        said = _check_verdict(checked, f"b{index}")
        assert (outcomes[name]["outcome"], verdicts[name]) == MAPPING[(said, extra)], (case, said, outcomes[name])
        # find-flags reads the role: a copy of its own is reported, and said to be doomed exactly when
        # the operator's earlier copy ends the process.
        assert (name in flagged) == (extra == "own"), case
        if extra == "own":
            assert ("does not save it" in flagged[name]) == (said == "rejected at parsing"), (case, flagged[name])
        # one note names the recorded parser that stood in, wherever the version is not recorded
        note = _verdicts.basis(engine, version).note
        assert (note in outcomes[name]["prediction"]) if note else True, case
    for index, (engine, dtype) in enumerate(generated_pods):
        name, said = f"p{index}", _check_verdict(checked, f"pb{index}")
        assert (outcomes[name]["outcome"], verdicts[name]) == POD_MAPPING[said], (engine, dtype, said, outcomes[name])
        assert name not in {f.object.name for f in found.findings}  # the webhook's own copy is no finding
