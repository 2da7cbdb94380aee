"""``kubectl kvdtype guard`` on the real kube-apiserver: the policies the plugin installs (through
kubectl, as a user would) warn of, and with --enforce refuse, exactly what ``find-flags`` finds in
the same objects: the admission matrix of tests/test_real_admission.py as ModelDeployment roles, as
a Deployment's and a CronJob's Pod template and as bare injected Pods; Bindings; generated argvs;
objects near the request size limit, decided within the CEL cost budget; a group version served by
an aggregated API server named as not covered; and --remove leaving the cluster as before.

One install for the module (the guard is cluster-wide), the Setting off throughout (as before the
upgrade: the operator's own rules, tests/operator/policies.yaml, refuse nothing then), and every
object sent with a server-side dry run, many to one kubectl."""

from __future__ import annotations

import json
import random
import re
import time
from pathlib import Path
from typing import Iterator, Optional

import pytest

from test_real_admission import PODS, ROLES, SGLANG, VALID, Pod, _deployment, _pod

pytestmark = pytest.mark.real

GUARD = ("kubectl-kvdtype-guard-roles", "kubectl-kvdtype-guard-pods", "kubectl-kvdtype-guard-bindings")
#: A guard's warning or refusal names the object first: "<Kind> <namespace>/<name>".
NAMED = re.compile(r"(?:with binding|denied request)[^:]*'kubectl-kvdtype-guard-[a-z]+'(?: denied request)?: "
                   r"(\w+) [^/\s]+/([^:\s]+)")
ROLES_NAMED = re.compile(r"role\(s\) (.*?) pass --kv-cache-dtype")


def _admission_objects(cluster: "Cluster") -> set[str]:  # noqa: F821 - tests/_controlplane.Cluster
    found = set()
    for kind in ("validatingadmissionpolicies", "validatingadmissionpolicybindings"):
        result = cluster.kubectl("get", kind, "-o", "name")
        assert result.returncode == 0, result.stderr
        found |= set(result.stdout.split())
    return found


@pytest.fixture(scope="module")
def guarded(control_plane, tmp_path_factory) -> Iterator["Cluster"]:  # noqa: F821
    """A namespace of the module's, the Setting off, and the guard installed by the plugin."""
    from _controlplane import Cluster
    from conftest import kubectl_path

    cluster = Cluster(control_plane, control_plane.namespace("guard"), tmp_path_factory.mktemp("guard"),
                      kubectl_path())
    control_plane.set_setting("false")
    cluster.before = _admission_objects(cluster)
    result = cluster.kvdtype("guard", "--apply")  # no terminal: --apply is the consent
    assert result.returncode == 0, result.stderr
    _wait_in_force(cluster, warn=True)
    try:
        yield cluster
    finally:
        cluster.kvdtype("guard", "--remove", "--apply")
        control_plane.clean(cluster.namespace)
        control_plane.set_setting("true")


def _binding(name: str, dtype: str) -> dict:
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding", "metadata": {"name": name},
            "spec": {"poolRef": {"name": "shared-dram"}, "domain": {"blockSize": 64, "dtype": dtype}}}


def _wait_in_force(cluster, warn: bool, timeout: float = 30) -> None:
    """Until the bindings' mode is the one the API server acts on (its policy cache follows a moment later)."""
    probe = json.dumps(_binding("probe", "auto"))
    deadline = time.monotonic() + timeout
    while True:
        result = cluster.kubectl("create", "--dry-run=server", "-f", "-", input=probe)
        if (result.returncode == 0 and "kubectl-kvdtype-guard-bindings" in result.stderr) if warn else \
                result.returncode != 0:
            return
        assert time.monotonic() < deadline, result.stderr
        time.sleep(0.1)


def _send(cluster, objects: list[dict], path: Path) -> tuple[int, dict[tuple[str, str], str]]:
    """All objects in one ``kubectl create --dry-run=server``: its exit status, and each guard
    warning or refusal by the (kind, name) it names."""
    path.write_text("\n---\n".join(json.dumps(o) for o in objects), encoding="utf-8")
    result = cluster.kubectl("create", "--dry-run=server", "-f", str(path), timeout=120)
    said = {}
    for line in result.stderr.splitlines():
        match = NAMED.search(line)
        if match:
            said[(match.group(1), match.group(2))] = line
    return result.returncode, said


def _read_flags(cluster, path: Path) -> dict[tuple[str, str], set[str]]:
    """What find-flags finds in the same objects (offline, -f): each object whose entries its engine
    reads as the flag (outside a shell line, which the guard leaves to it), and for roles which."""
    result = cluster.kvdtype("find-flags", "-f", str(path), "-o", "json", "-n", cluster.namespace)
    assert result.returncode in (0, 1), result.stderr
    found: dict[tuple[str, str], set[str]] = {}
    for item in json.loads(result.stdout)["items"]:
        if any(o["read"] and not o.get("inShell") for o in item["occurrences"]):
            found.setdefault((item["kind"], item["name"]), set()).add(item["role"] or "")
    return found


def _template_of(kind: str, pod: dict, name: str) -> dict:
    template = {"metadata": {**pod["metadata"], "labels": {**pod["metadata"]["labels"], "app": name}},
                "spec": dict(pod["spec"])}
    template["metadata"].pop("name")
    if kind == "Deployment":
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
                "spec": {"selector": {"matchLabels": {"app": name}}, "template": template}}
    template["spec"]["restartPolicy"] = "Never"
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
            "spec": {"schedule": "0 0 * * *", "jobTemplate": {"spec": {"template": template}}}}


def _matrix(namespace: str) -> tuple[list[dict], dict[tuple[str, str], bool]]:
    """The admission matrix as roles, templates and Pods, and Bindings: each object, and whether the
    upgrade's rules refuse it (the matrix's own expectation)."""
    objects, expected = [], {}
    for role in ROLES:
        deployment = _deployment(role)
        deployment["metadata"]["name"] = f"r-{role.name}"
        objects.append(deployment)
        expected[("ModelDeployment", f"r-{role.name}")] = role.refused
    for case in PODS:
        pod = _pod(case, f"p-{case.name}")
        objects.append(pod)
        expected[("Pod", f"p-{case.name}")] = case.refused
        if case.injected:
            continue  # only a Pod the webhook injected carries its record
        for kind, prefix in (("Deployment", "d"), ("CronJob", "c")):
            objects.append(_template_of(kind, pod, f"{prefix}-{case.name}"))
            expected[(kind, f"{prefix}-{case.name}")] = case.refused
    for name, dtype, warned in (("b-auto", "auto", True), ("b-misspelt", "FP8", True),
                                ("b-spelt-wrong", "fp8-e4m3", True), ("b-good", "bfloat16", False)):
        objects.append(_binding(name, dtype))
        expected[("KVCachePoolBinding", name)] = warned
    for obj in objects:
        obj["metadata"]["namespace"] = namespace
    return objects, expected


def test_the_guard_warns_then_refuses_what_find_flags_finds(guarded, tmp_path):
    objects, expected = _matrix(guarded.namespace)
    path = tmp_path / "matrix.yaml"
    status, warned = _send(guarded, objects, path)
    assert status == 0  # Warn, Audit: every write succeeds
    said = {key: key in warned for key in expected}
    assert said == expected, {k: v for k, v in said.items() if v != expected[k]}
    assert not set(warned) - set(expected)  # a clean case passes silently
    found = _read_flags(guarded, path)
    assert {key for key, flagged in expected.items() if flagged and key[0] != "KVCachePoolBinding"} == set(found)
    line = warned[("ModelDeployment", "r-equals")]
    assert f"--kv-cache-dtype={VALID} in role server" in line and "find-flags --fix" in line
    assert "at args[0]" in warned[("CronJob", "c-own")] and "FailedCreate" in warned[("CronJob", "c-own")]

    # What --enforce's plan says it refuses that runs today: objects stored before it.
    stored = [o for o in objects if o["metadata"]["name"] in ("r-spaced", "d-own", "r-skip-layers")]
    written = guarded.kubectl("create", "-f", "-", input="\n---\n".join(map(json.dumps, stored)))
    assert written.returncode == 0 and written.stderr.count("Warning: ") == 2  # stored, and warned of
    plan = guarded.kvdtype("guard", "--enforce", "-o", "json", "-n", guarded.namespace)
    denied = {f["object"]["name"] for f in json.loads(plan.stdout)["findings"] if f["code"] == "guard-would-deny"}
    assert denied == {"r-spaced", "d-own"}, plan.stdout

    result = guarded.kvdtype("guard", "--enforce", "--apply")
    assert result.returncode == 0, result.stderr
    _wait_in_force(guarded, warn=False)
    try:
        status, refused = _send(guarded, [o for o in objects if o not in stored], tmp_path / "again.yaml")
        assert status == 1
        said = {key: key in refused for key in expected if key[1] not in ("r-spaced", "d-own", "r-skip-layers")}
        assert said == {key: expected[key] for key in said}, {k: v for k, v in said.items() if v != expected[k]}
        assert all("denied request" in line for line in refused.values())
    finally:
        assert guarded.kvdtype("guard", "--apply").returncode == 0
        _wait_in_force(guarded, warn=True)


#: What a generated argv is made of: the flag's spellings each engine meets (read or not), near
#: misses, dotted options (vLLM's JSON arguments), other options, values, "--", and entries holding whitespace.
NAMES = ("--kv-cache-dtype", "--kv_cache_dtype", "--kv-cache_dtype", "--kv-cache-dt", "--kv-cache-d", "--kv_cache_d",
         "--kv-cache-dty", "--kv-cac", "--kv-cach", "--kv-cache", "--kv-cache-", "--kv-ca", "--kv",
         "-_kv-cache-dtype", "--kv-cache-dtype-skip-layers", "-kv-cache-dtype", "--KV-CACHE-DTYPE", "--port",
         "--max-model-len", "--model", "--kv-cache-dtype.x", "--kv_cache_dtype.a.b", "--kv-cache-dt.x", "--kv-cac.x",
         "--kv-cache-dtype-skip-layers.x")
VALUES = ("fp8", VALID, "bfloat16", "bf16", "auto", "8000", "-", "")
VERSIONS = ("0.18", "0.18.9", "0.19", "0.19.0.dev1", "0.19.0a1", "0.19.0b2", "0.19.0c1", "0.19.0rc1",
            "0.19.0-rc.1", "0.19.0_pre1", "0.19.0preview", "0.19.0-dev", "0.19.0-1", "0.19.0.post1",
            "0.19.0.post1.dev0", "0.19.0-cu124", "0.19.0-rocm", "0.19.0r1", "0.19.0rev2", "v0.19.0", "V0.18.1",
            " 0.18.0", "00.019.000", "0.19.0.0.1", "0.19.0.0.0", "0.18.99999999999999999999", "1", "0",
            "0.10", "nightly", "", "latest-0.18", "0.18.0+cu124", "0.19.0rc1.post1", "0.2")
ENGINES = (("vLLM", "0.18.0"), ("vLLM", "0.18.1"), ("vLLM", "0.19.0rc1"), ("vLLM", "v0.19"), ("vLLM", "0.29.0"),
           ("vLLM", "nightly"), ("vLLM", "0.10.0"), ("vllm", "0.33.0"), ("SGLang", "0.5.18"), ("SGLang", "0.5.23"),
           ("TensorRT-LLM", "1.0"))


def _entry(rng: random.Random) -> str:
    name, value = rng.choice(NAMES), rng.choice(VALUES)
    form = rng.randrange(8)
    if form == 0:
        return "--"
    if form == 1:
        return f"{name} {value}"  # one entry holding a space
    if form == 2:
        return f"{name}={value}" + rng.choice(("", " ", "\t", " x"))
    if form == 3:
        return value
    return name


def _argv(rng: random.Random) -> list[str]:
    return [_entry(rng) for _ in range(rng.randrange(5))]


def _swallowing(argv: list[str], dotted: bool) -> bool:
    """What the guard leaves to find-flags (``guard_rules._swallowing``): where the engine rewrites
    dotted options (``dotted``), one written without '=' before an option."""
    return dotted and any(a.startswith("-") and "." in a and "=" not in a and i + 1 < len(argv)
                          and argv[i + 1].startswith("-") for i, a in enumerate(argv))


#: A dotted option of the flag: whether find-flags reads it for an engine says whether the engine
#: rewrites dotted options (the reader's own answer, asked in the same run as the generated objects).
PROBE = ["--kv-cache-dtype.x", "fp8"]
#: The engines a generated Pod names (its annotation; "" none).
POD_ENGINES = ("vLLM", "SGLang", "sglang", "tgi", "")


def _roles_said(line: Optional[str]) -> set[str]:
    """The roles a warning names ({""}: an object without roles; none: no warning)."""
    if line is None:
        return set()
    roles = ROLES_NAMED.search(line)
    return set(roles.group(1).split(", ")) if roles else {""}


def test_the_policy_and_find_flags_agree_on_generated_argvs(guarded, tmp_path):
    rng = random.Random(52)
    objects, undecided = [], set()
    # The roles and Pod argvs by the engine they name, for what the guard leaves to find-flags.
    role_argvs: dict[tuple[str, str], list[tuple[tuple[str, str], str, list[str]]]] = {}
    pod_argvs: dict[str, list[tuple[tuple[str, str], list[str]]]] = {}
    for number, (engine, version) in enumerate(ENGINES):
        probe = _deployment(ROLES[0])
        probe["metadata"]["name"] = f"probe-{number}"
        probe["spec"]["engine"] = {"name": engine, "version": version}
        probe["spec"]["roles"][0]["extraArgs"] = PROBE
        objects.append(probe)
    for number, engine in enumerate(POD_ENGINES):
        probe_pod = _pod(Pod(f"probe-pod-{number}", tuple(PROBE), False, engine=engine))
        if not engine:
            del probe_pod["metadata"]["annotations"]["kvcache.gpustack.ai/engine"]
        objects.append(probe_pod)
    for number, (engine, version) in enumerate(ENGINES * 2):
        roles = [{"name": f"r{i}", "kind": "Server", "extraArgs": _argv(rng),
                  **({"command": ["vllm", "serve", "m"]} if rng.random() < 0.1 else {})} for i in range(16)]
        role_argvs.setdefault((engine, version), []).extend(
            (("ModelDeployment", f"gen-{number}"), r["name"], r["extraArgs"]) for r in roles if "command" not in r)
        deployment = _deployment(ROLES[0])
        deployment["metadata"]["name"] = f"gen-{number}"
        deployment["spec"]["engine"] = {"name": engine, "version": version}
        deployment["spec"]["roles"] = roles
        objects.append(deployment)
    # The version a deployment declares, compared with the recorded releases as the plugin orders them:
    # vLLM reads the abbreviation up to 0.18 (the newest release below 0.19, pre-releases of 0.19 included).
    for number, version in enumerate(VERSIONS):
        deployment = _deployment(ROLES[0])
        deployment["metadata"]["name"] = f"version-{number}"
        deployment["spec"]["engine"] = {"name": "vLLM", "version": version}
        deployment["spec"]["roles"][0]["extraArgs"] = ["--kv-cache-dt=fp8"]
        objects.append(deployment)
    for number in range(60):
        engine = rng.choice(POD_ENGINES)
        pod = _pod(Pod(f"gen-{number}", tuple(_argv(rng)), False, engine=engine,
                       command=rng.choice(((), ("vllm", "serve", "m"), SGLANG, ("vllm", "serve", "--kv-cache-dtype"))),
                       injected=rng.random() < 0.3))
        if not engine:
            del pod["metadata"]["annotations"]["kvcache.gpustack.ai/engine"]
        objects.append(pod)
        # A Pod whose engine only the webhook's JSON record names is left to find-flags: the guard says nothing.
        unread = not engine and "kvcache.gpustack.ai/injected" in pod["metadata"]["annotations"]
        container = pod["spec"]["containers"][0]
        keys = [("Pod", pod["metadata"]["name"])]
        if number % 3 == 0:  # its Pod template too, in a Deployment or a CronJob
            objects.append(_template_of(rng.choice(("Deployment", "CronJob")), pod, f"gen-template-{number}"))
            keys.append((objects[-1]["kind"], objects[-1]["metadata"]["name"]))
        if unread:
            undecided.update(keys)
        argv = [*container.get("command", []), *container.get("args", [])]
        pod_argvs.setdefault(engine, []).extend((key, argv) for key in keys)
    for obj in objects:
        obj["metadata"]["namespace"] = guarded.namespace
    path = tmp_path / "generated.yaml"
    status, warned = _send(guarded, objects, path)
    assert status == 0
    found = _read_flags(guarded, path)
    # Where an engine rewrites dotted options, as find-flags read the probes: an argv whose dotted
    # option takes an option as its value is left to find-flags (the guard says nothing of it).
    undecided_roles: dict[tuple[str, str], set[str]] = {}
    for number, engine_version in enumerate(ENGINES):
        dotted = ("ModelDeployment", f"probe-{number}") in found
        for key, role, argv in role_argvs.get(engine_version, []):
            if _swallowing(argv, dotted):
                undecided_roles.setdefault(key, set()).add(role)
    for number, engine in enumerate(POD_ENGINES):
        dotted = ("Pod", f"probe-pod-{number}") in found
        undecided.update(key for key, argv in pod_argvs.get(engine, []) if _swallowing(argv, dotted))
    assert undecided and not undecided & set(warned)
    assert undecided_roles and all(not roles & said_roles for key, roles in undecided_roles.items()
                                   for said_roles in [_roles_said(warned.get(key))])
    found = {key: roles - undecided_roles.get(key, set()) for key, roles in found.items() if key not in undecided}
    found = {key: roles for key, roles in found.items() if roles}
    said = {key: _roles_said(line) for key, line in warned.items()}
    assert said == found, {k: (said.get(k), found.get(k)) for k in {*said, *found} if said.get(k) != found.get(k)}
    assert len(found) > 20 and sum(len(v) for v in found.values()) > 60  # the generator reaches the rules
    versions = {name for _, name in found if name.startswith("version-")}
    assert 5 < len(versions) < len(VERSIONS) - 5  # both sides of the recorded release where it changes


def _strict(cluster, tmp_path: Path) -> list[dict]:
    """The guard's own rules, as `guard -o yaml` writes them, renamed, with failurePolicy Fail and
    Deny: an evaluation past the cost budget would refuse with the budget's error, not the rules'."""
    import yaml

    result = cluster.kvdtype("guard", "-o", "yaml")
    assert result.returncode == 0, result.stderr
    strict = []
    for obj in yaml.safe_load_all(result.stdout):
        name = obj["metadata"]["name"].replace("kubectl-kvdtype-guard", "strict-guard")
        obj["metadata"] = {"name": name}
        if obj["kind"] == "ValidatingAdmissionPolicy":
            obj["spec"]["failurePolicy"] = "Fail"
        else:
            obj["spec"].update(policyName=name, validationActions=["Deny"])
        strict.append(obj)
    return strict


def _dry_create(plane, obj: dict) -> tuple[int, list[str], str]:
    """A server-side dry-run create as admin over one HTTPS request (kubectl spends seconds decoding an
    object of megabytes): its status, the Warning headers, and the body."""
    import http.client
    import ssl

    host, port = plane.url.removeprefix("https://").rsplit(":", 1)
    conn = http.client.HTTPSConnection(host, int(port), context=ssl.create_default_context(cadata=plane.ca_pem),
                                       timeout=60)
    group = obj["apiVersion"]
    base = f"/api/{group}" if "/" not in group else f"/apis/{group}"
    plural = {"Pod": "pods", "ModelDeployment": "modeldeployments"}[obj["kind"]]
    try:
        conn.request("POST", f"{base}/namespaces/{obj['metadata']['namespace']}/{plural}?dryRun=All",
                     body=json.dumps(obj).encode(), headers={"Authorization": "Bearer admin-token",
                                                             "Content-Type": "application/json"})
        answer = conn.getresponse()
        return answer.status, answer.headers.get_all("Warning") or [], answer.read().decode(errors="replace")
    finally:
        conn.close()


def _big_deployment(name: str, roles: int, entries: int, entry: str, last: Optional[str] = None) -> dict:
    deployment = _deployment(ROLES[0])
    deployment["metadata"]["name"] = name
    deployment["spec"]["engine"] = {"name": "vLLM", "version": "0.18.0"}  # the most spellings read
    deployment["spec"]["roles"] = [{"name": f"r{i}", "kind": "Server",
                                    "extraArgs": [entry] * (entries - 1) + [last or entry]} for i in range(roles)]
    return deployment


def _big_pod(name: str, entries: int, entry: str, last: Optional[str] = None) -> dict:
    return _pod(Pod(name, tuple([entry] * (entries - 1) + [last or entry]), False))


def test_objects_near_the_request_size_limit_are_decided_within_the_cost_budget(guarded, tmp_path):
    near = "--kv-cache-dtypX" + "y" * 2030  # passes every cheap test, is no spelling: the dearest entry
    cases = {  # name: (object, whether the rules refuse it)
        "big-roles": (_big_deployment("big-roles", 16, 32, near), False),
        "big-roles-flag": (_big_deployment("big-roles-flag", 16, 32, near, "--kv-cache-d=fp8"), True),
        # Past the bounds (the API server's own handling of a custom resource of megabytes takes
        # seconds of CI time, a Pod's a fraction: the request size limit is reached with a Pod).
        "many-roles": (_big_deployment("many-roles", 2000, 1, "--kv-cache-dtype=fp8"), False),
        "long-role": (_big_deployment("long-role", 1, 5000, "--x", "--kv-cache-dtype=fp8"), False),
        "big-pod": (_big_pod("big-pod", 253, near), False),  # with its command: the 256 entries read
        "big-pod-flag": (_big_pod("big-pod-flag", 253, near, "--kv-cache-dtype=fp8"), True),
        "long-pod": (_big_pod("long-pod", 400000, "--x", "--kv-cache-dtype=fp8"), False),
    }
    sizes = []
    for obj, _ in cases.values():
        obj["metadata"]["namespace"] = guarded.namespace
        sizes.append(len(json.dumps(obj)))
    assert 2_500_000 < max(sizes) < 3 * 1024 * 1024  # near the API server's request size limit
    # Warn: the guard's own rules say it (and nothing else refuses).
    for name, (obj, refused) in cases.items():
        status, warnings, body = _dry_create(guarded.plane, obj)
        assert status == 201 and any(name in w for w in warnings) == refused, (name, status, warnings, body[:300])
    strict = _strict(guarded, tmp_path)
    created = guarded.kubectl("apply", "--server-side", "-f", "-", input="\n---\n".join(map(json.dumps, strict)))
    assert created.returncode == 0, created.stderr
    try:
        deadline = time.monotonic() + 30
        while guarded.kubectl("create", "--dry-run=server", "-f", "-",
                              input=json.dumps(_binding("probe", "auto"))).returncode == 0:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        for name, (obj, refused) in cases.items():
            status, _, body = _dry_create(guarded.plane, obj)
            assert (status != 201) == refused, (name, status, body[:500])
            if refused:  # the rules' own message, not an evaluation error
                assert status == 403 and "strict-guard" in body and "--kv-cache-d" in body, body[:500]
    finally:
        guarded.kubectl("delete", "-f", "-", input="\n---\n".join(map(json.dumps, strict)))


def test_a_group_version_an_aggregated_server_serves_is_named_not_covered(guarded):
    service = {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
               "metadata": {"name": "v2.worker.gpustack.ai"},
               "spec": {"group": "worker.gpustack.ai", "version": "v2", "groupPriorityMinimum": 1000,
                        "versionPriority": 1, "insecureSkipTLSVerify": True,
                        "service": {"namespace": "gpustack-system", "name": "gpustack-operator-api", "port": 443}}}
    assert guarded.kubectl("create", "-f", "-", input=json.dumps(service)).returncode == 0
    try:
        result = guarded.kvdtype("guard", "-o", "json")
        assert result.returncode == 0, result.stderr
        report = json.loads(result.stdout)
        coverage = {(row["kinds"], row["groupVersion"]): row["covered"] for row in report["summary"]["coverage"]}
        assert coverage[("ModelDeployment", "worker.gpustack.ai/v2")] is False
        assert coverage[("ModelDeployment", "worker.gpustack.ai/v1")] is True
        assert coverage[("Pod", "v1")] is True and coverage[("Job, CronJob", "batch/v1")] is True
        uncovered = [f for f in report["findings"] if f["code"] == "guard-not-covered"]
        assert {f["object"]["name"] for f in uncovered} == {"worker.gpustack.ai/v2"}
        assert all("gpustack-system/gpustack-operator-api" in f["message"] and "find-flags" in f["message"]
                   for f in uncovered)
    finally:
        guarded.kubectl("delete", "apiservice", "v2.worker.gpustack.ai")


def test_a_fleet_gets_a_plan_per_context_and_its_apply_is_refused(guarded, tmp_path):
    config = str(guarded.plane.write_kubeconfig(tmp_path / "fleet", users=("admin", "ci-bot")))
    result = guarded.kvdtype("guard", "--all-contexts", "-o", "json", "--kubeconfig", config)
    fleet = json.loads(result.stdout)
    by_context = {entry["context"]: entry for entry in fleet["contexts"]}
    assert set(by_context) == {"admin", "ci-bot"}, result.stdout
    assert {item["action"] for item in by_context["admin"]["report"]["items"]} == {"unchanged"}
    assert "403" in json.dumps(by_context["ci-bot"])  # a reader may not read the policies: said in its row
    refused = guarded.kvdtype("guard", "--apply", "--all-contexts", "--kubeconfig", config)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "one cluster" in refused.stderr


def test_the_guard_role_is_enough_to_plan_install_and_remove(guarded):
    import yaml

    from _controlplane import RBAC

    roles = {r["metadata"]["name"]: r["rules"] for r in yaml.safe_load_all(RBAC.read_text(encoding="utf-8"))}
    with guarded.plane.grant("limited", roles["kvdtype-guard"]):
        for args in (("guard",), ("guard", "--remove", "--apply"), ("guard", "--apply")):
            result = guarded.kvdtype(*args, user="limited")
            assert result.returncode == 0, (args, result.stderr)
    # --enforce's plan reads what runs today, as kvdtype-reader may.
    with guarded.plane.grant("limited", roles["kvdtype-guard"] + roles["kvdtype-reader"]):
        for args in (("guard", "--enforce", "--apply"), ("guard", "--apply")):
            result = guarded.kvdtype(*args, user="limited")
            assert result.returncode == 0, (args, result.stderr)
    assert guarded.get("validatingadmissionpolicybindings", GUARD[0], namespace=None)["spec"][
        "validationActions"] == ["Warn", "Audit"]
    _wait_in_force(guarded, warn=True)


def test_check_sees_the_guard_and_remove_leaves_the_cluster_as_before(guarded):
    check = json.loads(guarded.kvdtype("check", "-A", "-o", "json", user="reader").stdout)
    assert check["summary"]["guard"]["mode"] == "warn" and check["summary"]["guard"]["stale"] is False
    assert [f["code"] for f in check["findings"] if f["code"].startswith("guard-")] == ["guard-installed"]
    # Once the operator enforces the same rules (the Setting on), preflight's to-do says the guard may go.
    todo = json.loads(guarded.kvdtype("preflight", "-A", "-o", "json", user="reader").stdout)["items"]
    assert "remove-guard" not in [item["action"] for item in todo]
    guarded.plane.set_setting("true")
    try:
        todo = json.loads(guarded.kvdtype("preflight", "-A", "-o", "json", user="reader").stdout)["items"]
        assert [item["command"] for item in todo if item["action"] == "remove-guard"] == [
            "kubectl kvdtype guard --remove --apply"]
    finally:
        guarded.plane.set_setting("false")
    # A guard written from other records is stale.
    guarded.kubectl("annotate", "validatingadmissionpolicybinding", GUARD[0],
                    "kvdtype.gpustack.ai/guard-records=0000", "--overwrite", "--field-manager=kubectl-kvdtype")
    check = json.loads(guarded.kvdtype("check", "-A", "-o", "json", user="reader").stdout)
    assert "guard-stale" in [f["code"] for f in check["findings"]]
    # A policy someone else changed is neither overwritten nor removed without --force-managed.
    guarded.kubectl("annotate", "validatingadmissionpolicy", GUARD[1], "team/owner=me")
    for args in (("guard", "--apply"), ("guard", "--remove", "--apply")):
        refused = guarded.kvdtype(*args)
        assert refused.returncode == 3 and "kubectl-annotate" in refused.stderr and "--force-managed" in refused.stderr
    plan = json.loads(guarded.kvdtype("guard", "-o", "json").stdout)
    assert [f["object"]["name"] for f in plan["findings"] if f["code"] == "guard-foreign"] == [GUARD[1]]
    assert len(_admission_objects(guarded) - guarded.before) == 6
    dry = guarded.kvdtype("guard", "--remove", "--apply", "--force-managed", "--dry-run")
    assert dry.returncode == 0 and "dryRun=All (nothing persisted): removed" in dry.stdout, dry.stderr
    assert len(_admission_objects(guarded) - guarded.before) == 6
    removed = guarded.kvdtype("guard", "--remove", "--apply", "--force-managed")
    assert removed.returncode == 0, removed.stderr
    assert _admission_objects(guarded) == guarded.before
    assert guarded.kvdtype("guard", "--apply").returncode == 0  # for the fixture's own removal
