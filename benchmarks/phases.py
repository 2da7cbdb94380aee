#!/usr/bin/env python3
"""Where a small live run's time goes, by phase (a script, not a test).

    .venv/bin/python benchmarks/phases.py                          # 100 deployments, check/find-flags/verify
    .venv/bin/python benchmarks/phases.py --size 1000 --repeat 7
    .venv/bin/python benchmarks/phases.py --tree ../other-checkout # the same phases of another checkout

It starts benchmarks/apiserver.py on loopback with --size ModelDeployments (as bench.py does), then
runs each judging subcommand (`-A -o json`) --repeat times, each in a fresh Python process that
imports the plugin from --tree (default: this checkout, bytecode written first) under cProfile and
prints the cumulative time of the functions that mark each phase. Medians are printed, in ms:

    process     the whole run of main(), from its first line to the result written
    imports     every module imported on the way (cProfile's _find_and_load, outermost calls),
                wherever it happens: the phases below include the imports they trigger
    kubeconfig  resolving the kubeconfig (kubeconfig.resolve)
    connect     the cluster source made: credentials, TLS, the transport (ClusterSource.__init__)
    reads       the reads, side by side, waits on the server and the JSON parsed included (the
                main thread's wait in kinds.list_early, which list_many is too: the requests run
                in threads, which cProfile does not see into)
    judging     the subcommand's report built from what was read (build_*_report)
    rendering   the report written as -o json (render)

Under the profiler every Python call costs more, so these are relative sizes, not the run's
times: bench.py gives those. The start of the interpreter itself (before main) is not here:
`python -c pass` is its floor; nor is `site` (the runs use -S, see ``profiled``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from apiserver import BenchApiServer  # noqa: E402
from bench import objects, run_env  # noqa: E402

#: Each phase: the functions (a file's tail and a function name, as pstats names them) whose
#: cumulative time it is.
PHASES = {
    "process": [("_cli/main.py", "main")],
    "imports": [("<frozen importlib._bootstrap>", "_find_and_load")],
    "kubeconfig": [("_sources/kubeconfig.py", "resolve")],
    "connect": [("_sources/cluster.py", "__init__")],
    "reads": [("_sources/kinds.py", "list_early")],  # list_many's reads go through it too
    "judging": [("_judging/bindings.py", "build_check_report"), ("_judging/flags.py", "build_find_flags_report"),
                ("_judging/replicas.py", "build_verify_report")],
    "rendering": [("_output/render.py", "render")],
}

#: The profiled run, in a fresh process: main() under cProfile, then each phase's cumulative ms as JSON.
_PROFILED = """
import cProfile, io, json, pstats, sys
profile = cProfile.Profile()
profile.enable()
from kubectl_kvdtype._cli.main import main
# Its arguments given, main() returns once the result is written, as in the tests; as the console
# script (none given) it would end the process there, before the profile below is printed.
try:
    main(sys.argv[2:])
except SystemExit:
    pass
profile.disable()
stats = pstats.Stats(profile, stream=io.StringIO()).stats
import kubectl_kvdtype
print(kubectl_kvdtype.__file__)
print(json.dumps([[file, line, name, cumulative] for (file, line, name), (_, _, _, cumulative, _) in stats.items()]))
"""


def profiled(tree: Path, argv: list[str], env: dict) -> dict[str, float]:
    """One run's phases, in ms."""
    # -S: no site, so no editable install's finder, which would import this checkout's plugin
    # whatever PYTHONPATH says; the venv's packages come after the tree on PYTHONPATH instead. And
    # the run starts in the tree: -c puts the working directory first on the path.
    path = os.pathsep.join([str(tree), sysconfig.get_paths()["purelib"]])
    result = subprocess.run([sys.executable, "-S", "-c", _PROFILED, "-", *argv], capture_output=True, text=True,
                            env={**env, "PYTHONPATH": path}, cwd=tree, timeout=600)
    *_, package, last = result.stdout.strip().splitlines()
    if not Path(package).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"the run imported {package}, not the plugin of {tree}")
    rows = json.loads(last)
    found = {}
    for phase, marks in PHASES.items():
        found[phase] = 1000 * sum(cumulative for file, _, name, cumulative in rows
                                  if any(file.endswith(tail) and name == function for tail, function in marks))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100, help="ModelDeployments on the server")
    parser.add_argument("--repeat", type=int, default=5, help="runs per subcommand (the median is shown)")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose kubectl_kvdtype is profiled")
    parser.add_argument("commands", nargs="*", default=["check", "find-flags", "verify"])
    args = parser.parse_args()
    import compileall

    compileall.compile_dir(str(args.tree / "kubectl_kvdtype"), quiet=1)  # as an install would leave it
    with BenchApiServer(objects(args.size)) as server, tempfile.TemporaryDirectory() as home:
        env = run_env(server.write_kubeconfig(Path(home) / "kubeconfig"), home)
        print(f"phases of a live run at {args.size:,} ModelDeployments, {args.tree}: median of {args.repeat}, ms "
              "(under cProfile: relative sizes)")
        print("| phase | " + " | ".join(f"`{c} -A`" for c in args.commands) + " |")
        print("|---|" + "---:|" * len(args.commands))
        runs = {c: [profiled(args.tree, [c, "-A", "-o", "json"], env) for _ in range(args.repeat)]
                for c in args.commands}
        for phase in PHASES:
            cells = [f"{statistics.median(r[phase] for r in runs[c]):.0f}" for c in args.commands]
            print(f"| {phase} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
