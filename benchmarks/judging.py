#!/usr/bin/env python3
"""How long ``verify -A`` spends judging, in-process (a script, not a test).

    .venv/bin/python benchmarks/judging.py            # 10,000 ModelDeployments, 20,000 replica Pods
    .venv/bin/python benchmarks/judging.py --distinct-models   # no two deployments share an argv
    .venv/bin/python benchmarks/judging.py --every-command     # each judging subcommand's own work

Builds the same objects as benchmarks/bench.py (each deployment with its Binding and two replica
Pods; a tenth of the Bindings spell bf16, a twentieth of the roles pass the flag themselves),
slims the Pods as a live LIST does, and times ``_judging.replicas.build_verify_report`` over them: the first run
(every argv reader cache cold, the engine tables loaded) and the median of the runs after it, in
CPU seconds. No cluster and no kubectl: this is the judging cost alone. The benchmark's
deployments all serve one model, so their replicas run a handful of distinct argvs;
``--distinct-models`` gives each its own, the worst case for the argv reader.

``--every-command`` times each judging subcommand's whole judgement instead, on the same objects
read once: ``check -A``, ``find-flags -A``, ``verify -A`` and ``preflight -A`` as the command line
runs them (``_cli.main.judge``: the report built, its summaries and the managers named) on the
objects written as one manifest file (``-f``), each subcommand's first run reading the file, the
runs after it judging what its source already holds (its in-memory listing included: a selector
matched, each object cut as a live LIST cuts it). No reading, no output, no cluster: most of what
the plugin does beyond the reads of its floor row (benchmarks/real.py) and the report it writes.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench import listed, objects  # noqa: E402
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


#: The judging subcommands --every-command times, as the command line names them.
COMMANDS = ("check", "find-flags", "verify", "preflight")


def every_command(n: int, repeat: int) -> None:
    """Each of COMMANDS judged in-process on N deployments' objects read once (see the docstring)."""
    from kubectl_kvdtype._cli.main import judge, parse
    from kubectl_kvdtype._commands.command import CommonOptions, Context
    from kubectl_kvdtype._kits.env import Environment

    with tempfile.TemporaryDirectory(prefix="kvdtype-judging-") as work:
        dump = Path(work) / "cluster.json"
        dump.write_text(json.dumps(listed(n)), encoding="utf-8")
        for command in COMMANDS:
            options = parse([command, "-A", "-f", str(dump), "-o", "json"])
            context = Context(options=options, common=CommonOptions.of(options), env=Environment())
            times = []
            for _ in range(repeat + 1):
                start = time.process_time()
                report = judge(context)
                times.append(time.process_time() - start)
            print(f"{command} -A: {len(report.items):,} items, {len(report.findings):,} findings; CPU judging "
                  f"(the objects read already): median of {repeat} {statistics.median(times[1:]):.3f} s "
                  f"(the first run, reading the file too, {times[0]:.3f} s)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deployments", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--distinct-models", action="store_true",
                        help="every deployment serves its own model, so no two deployments share an argv")
    parser.add_argument("--every-command", action="store_true",
                        help="time each judging subcommand's whole judgement on the objects read once")
    options = parser.parse_args()
    gc.disable()  # as the CLI runs (kubectl_kvdtype._cli.main.main): plain JSON forms no cycles
    if options.every_command:
        every_command(options.deployments, options.repeat)
        return 0
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
