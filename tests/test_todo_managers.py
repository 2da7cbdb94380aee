"""preflight's to-do for a rebind names every manager of every consumer the rebind recreates, not only
the one whose finding it is (issue 52's last point): a Helm-managed ModelDeployment beside an Argo
CD-tracked one on one rejected Binding; check -o json names the managers of each consumer too."""

from __future__ import annotations

import json
from pathlib import Path

from _support import in_process

DUMP = """
apiVersion: worker.gpustack.ai/v1
kind: KVCachePoolBinding
metadata: {name: legacy, namespace: team-a}
spec: {poolRef: {name: shared-dram}, domain: {blockSize: 64, dtype: bf16}}
---
apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata:
  name: chat-helm
  namespace: team-a
  labels: {app.kubernetes.io/managed-by: Helm}
  annotations: {meta.helm.sh/release-name: chat, meta.helm.sh/release-namespace: team-a}
spec:
  model: {name: Qwen/Qwen3-8B}
  engine: {name: vLLM, version: "0.29.0"}
  kvCache: {poolRef: {name: legacy}}
  roles: [{name: server, kind: Server, replicas: 1}]
---
apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata:
  name: chat-argo
  namespace: team-a
  annotations: {argocd.argoproj.io/tracking-id: "chat-app:worker.gpustack.ai/ModelDeployment:team-a/chat-argo"}
spec:
  model: {name: Qwen/Qwen3-8B}
  engine: {name: vLLM, version: "0.29.0"}
  kvCache: {poolRef: {name: legacy}}
  roles: [{name: server, kind: Server, replicas: 1}]
"""


def test_a_rebinds_to_do_names_the_sources_of_every_consumer_it_recreates(tmp_path: Path) -> None:
    dump = tmp_path / "dump.yaml"
    dump.write_text(DUMP, encoding="utf-8")
    status, out, err = in_process(["preflight", "-f", str(dump), "-o", "json"], environ={})
    assert status == 1, err
    items = {item["action"]: item for item in json.loads(out)["items"]}
    source, rebind = items["change-source"], items["rebind"]
    for said in (source["what"], rebind["what"]):
        assert "Argo CD Application chat-app" in said and "Helm release team-a/chat" in said, said
    assert rebind["command"].endswith("--apply --force-managed")
    assert source["order"] < rebind["order"]
    status, out, _ = in_process(["check", "-f", str(dump), "-o", "json"], environ={})
    (rejected,) = [f for f in json.loads(out)["findings"] if f["code"] == "dtype-rejected"]
    assert {c["name"]: bool(c.get("managedBy")) for c in rejected["consumers"]} == {"chat-helm": True,
                                                                                   "chat-argo": True}
