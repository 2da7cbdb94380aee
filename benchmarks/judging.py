#!/usr/bin/env python3
"""How long ``verify -A`` spends judging, in-process (a script, not a test).

    .venv/bin/python benchmarks/judging.py            # 10,000 ModelDeployments, 20,000 replica Pods

Builds the same objects as benchmarks/bench.py (each deployment with its Binding and two replica
Pods; a tenth of the Bindings spell bf16, a twentieth of the roles pass the flag themselves),
slims the Pods as a live LIST does, and times ``verify.build_verify_report`` over them: the first run
(every argv reader cache cold, the engine tables loaded) and the median of the runs after it.
No cluster and no kubectl: this is the judging cost alone.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench import objects  # noqa: E402

from kubectl_kvdtype import _model, verify  # noqa: E402


def inventory(n: int) -> verify.PodInventory:
    found = objects(n)
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
    options = parser.parse_args()
    judged = inventory(options.deployments)
    times = []
    for _ in range(options.repeat + 1):
        start = time.perf_counter()
        report = verify.build_verify_report(judged)
        times.append(time.perf_counter() - start)
    verdicts = report.summary["verdicts"]
    print(f"{len(judged.replicas):,} replica Pods judged; verdicts {verdicts}")
    print(f"first run (cold caches): {times[0]:.3f} s; median of the next {options.repeat}: "
          f"{statistics.median(times[1:]):.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
