#!/usr/bin/env python3
"""How long ``verify -A`` spends judging, in-process (a script, not a test).

    .venv/bin/python benchmarks/judging.py            # 10,000 ModelDeployments, 20,000 replica Pods
    .venv/bin/python benchmarks/judging.py --distinct-models   # no two deployments share an argv

Builds the same objects as benchmarks/bench.py (each deployment with its Binding and two replica
Pods; a tenth of the Bindings spell bf16, a twentieth of the roles pass the flag themselves),
slims the Pods as a live LIST does, and times ``_judging.replicas.build_verify_report`` over them: the first run
(every argv reader cache cold, the engine tables loaded) and the median of the runs after it, in
CPU seconds. No cluster and no kubectl: this is the judging cost alone. The benchmark's
deployments all serve one model, so their replicas run a handful of distinct argvs;
``--distinct-models`` gives each its own, the worst case for the argv reader.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench import objects  # noqa: E402
from kubectl_kvdtype._judging import replicas as verify  # noqa: E402
from kubectl_kvdtype._sources import model as _model


def inventory(n: int, distinct: bool = False) -> verify.PodInventory:
    found = objects(n)
    if distinct:  # each deployment serves a model of its own: its replicas' argv is its own too
        for pod in (o for o in found if o["kind"] == "Pod"):
            container = pod["spec"]["containers"][0]
            own = f"org/{pod['metadata']['labels']['app.kubernetes.io/instance']}"
            container["command"] = [own if word == "Qwen/Qwen3-8B" else word for word in container["command"]]
    by_kind: dict[str, list[dict]] = {}
    for obj in found:
        by_kind.setdefault(obj["kind"], []).append(obj)
    setting = next(o for o in found if o["kind"] == "Setting")
    return verify.PodInventory(by_kind["ModelDeployment"],
                            {(_model.namespace_of(b), _model.name_of(b)): b for b in by_kind["KVCachePoolBinding"]},
                            [_model.slim_pod(p) for p in by_kind["Pod"]], [], setting, None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deployments", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--distinct-models", action="store_true",
                        help="every deployment serves its own model, so no two deployments share an argv")
    options = parser.parse_args()
    gc.disable()  # as the CLI runs (kubectl_kvdtype._cli.main.main): plain JSON forms no cycles
    judged = inventory(options.deployments, options.distinct_models)
    times = []
    for _ in range(options.repeat + 1):
        start = time.process_time()
        report = verify.build_verify_report(judged)
        times.append(time.process_time() - start)
    verdicts = report.summary["verdicts"]
    print(f"{len(judged.replicas):,} replica Pods judged; verdicts {verdicts}")
    print(f"CPU: first run (cold caches) {times[0]:.3f} s; median of the next {options.repeat}: "
          f"{statistics.median(times[1:]):.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
