"""Golden outputs written before the private modules moved into their layer subpackages (issue
25): `-o json` of every subcommand on the bundled examples, the rebind plan against the seeded
fake API server, and every `--help`. The move changed no behaviour; these say so. The man page is
its own golden: tests/test_manpage.py checks the committed page against the parser.

``scripts/regenerate`` writes them all, from the lists it holds (``REPORTS``, ``HELPS``,
``REBIND_PLAN``), which these tests read: a change that means to alter one runs it and says why in
its commit. The help texts are argparse's on the release Python (noxfile.py), whose help
formatting differs between Python versions, so they are compared there only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.machinery import SourceFileLoader
from importlib.util import module_from_spec, spec_from_loader

import pytest

from _support import PLUGIN, ROOT
from conftest import kubectl_path
from test_packaging import RELEASE_PYTHON as RELEASE  # noxfile.py's, the one statement of it

pytestmark = pytest.mark.version_sensitive  # --help is argparse's (test_tiers.py)



def _load_script(name: str):
    loader = SourceFileLoader(name, str(ROOT / "scripts" / name))
    module = module_from_spec(spec_from_loader(name, loader))
    loader.exec_module(module)
    return module


REGENERATE = _load_script("regenerate")
GOLDEN = REGENERATE.GOLDEN
RELEASE_PYTHON = tuple(int(part) for part in RELEASE.split("."))
REPORTS, HELPS = REGENERATE.REPORTS, REGENERATE.HELPS


def _plugin(*args: str, env: dict | None = None, cwd=ROOT) -> subprocess.CompletedProcess[str]:
    environ = dict(env or os.environ, **REGENERATE.PLUGIN_ENV)
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
    assert _plugin(*words, "--help").stdout == (GOLDEN / REGENERATE.help_name(words)).read_text(encoding="utf-8")


def test_every_golden_file_is_one_scripts_regenerate_writes():
    written = {*REPORTS, REGENERATE.REBIND_PLAN[0], *(REGENERATE.help_name(words) for words in HELPS)}
    assert {path.name for path in GOLDEN.iterdir()} == written


def test_the_rebind_plan_against_the_seeded_fake_is_the_golden_one(cluster, fake, tmp_path):
    name, words = REGENERATE.REBIND_PLAN
    result = subprocess.run([kubectl_path(), "kvdtype", *words], cwd=tmp_path, env=cluster,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    plan = result.stdout.replace(fake.url, REGENERATE.FAKE_SERVER)
    assert json.loads(plan) == json.loads((GOLDEN / name).read_text(encoding="utf-8"))
