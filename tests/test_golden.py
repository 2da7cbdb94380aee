"""Golden outputs written before the private modules moved into their layer subpackages (issue
25): `-o json` of every subcommand on the bundled examples, the rebind plan against the seeded
fake API server, every `--help` and the man page. The move changed no behaviour; these say so.

A change that means to alter one of them regenerates it (the file names say the command) and says
why in its commit. The help texts are argparse's on the release Python (noxfile.py), whose help
formatting differs between Python versions, so they are compared there only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from _support import PLUGIN, ROOT
from conftest import kubectl_path
from test_packaging import RELEASE_PYTHON as RELEASE  # noxfile.py's, the one statement of it

pytestmark = pytest.mark.version_sensitive  # --help is argparse's (test_tiers.py)

GOLDEN = ROOT / "tests" / "data" / "golden"
RELEASE_PYTHON = tuple(int(part) for part in RELEASE.split("."))
REPORTS = {
    "check.json": ["check"], "find-flags.json": ["find-flags"], "verify.json": ["verify"],
    "preflight.json": ["preflight"], "escape-status.json": ["escape", "status"],
}
HELPS = [[], ["check"], ["find-flags"], ["verify"], ["preflight"], ["escape"], ["escape", "off"], ["escape", "on"],
         ["escape", "status"], ["escape", "rebind"], ["escape", "restore"], ["completion"]]


def _plugin(*args: str, env: dict | None = None, cwd=ROOT) -> subprocess.CompletedProcess[str]:
    environ = dict(env or os.environ, NO_COLOR="1", COLUMNS="100")
    return subprocess.run([PLUGIN, *args], cwd=cwd, env=environ, capture_output=True, text=True, timeout=60)


@pytest.mark.e2e  # the plugin as a subprocess
@pytest.mark.parametrize("name", sorted(REPORTS))
def test_reports_on_the_examples_are_the_golden_ones(name):
    result = _plugin(*REPORTS[name], "-f", "examples/", "-o", "json")
    assert json.loads(result.stdout) == json.loads((GOLDEN / name).read_text(encoding="utf-8"))


@pytest.mark.e2e  # the plugin as a subprocess
@pytest.mark.skipif(sys.version_info[:2] != RELEASE_PYTHON, reason="the golden help is the release Python's argparse")
@pytest.mark.parametrize("words", HELPS, ids=lambda words: " ".join(words) or "top")
def test_every_help_is_the_golden_one(words):
    name = "help" + "".join(f"-{word}" for word in words) + ".txt"
    assert _plugin(*words, "--help").stdout == (GOLDEN / name).read_text(encoding="utf-8")


def test_the_man_page_is_the_golden_one():
    assert (ROOT / "man" / "kubectl-kvdtype.1").read_text(encoding="utf-8") == \
        (GOLDEN / "kubectl-kvdtype.1").read_text(encoding="utf-8")


def test_the_rebind_plan_against_the_seeded_fake_is_the_golden_one(cluster, fake, tmp_path):
    result = subprocess.run([kubectl_path(), "kvdtype", "escape", "rebind", "legacy", "-n", "team-a", "--dtype",
                             "bfloat16", "--new-name", "legacy-bf16", "-o", "json"], cwd=tmp_path, env=cluster,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    plan = result.stdout.replace(fake.url, "https://127.0.0.1:PORT")
    assert json.loads(plan) == json.loads((GOLDEN / "rebind-plan.json").read_text(encoding="utf-8"))
