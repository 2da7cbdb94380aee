"""One consent rule for every write (issue 39), through real kubectl against the fake API server.

``--apply`` means the same for every write that plans by default (escape rebind, escape restore,
find-flags --fix): on a terminal the write is shown and asked about ([y/N], ``--yes`` skips it);
without one, nothing can be asked and ``--apply`` is the consent, as ``kubectl apply`` or ``kubectl
delete`` ask nothing of a script. ``escape off`` and ``escape on`` differ, as their ``--help`` says:
the action is the whole command, with no plan first and no ``--apply``, and it recreates every
pool-attached replica in the cluster, so without a terminal they need ``--yes``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Callable

import pytest

from _support import EXAMPLES, SETTING, SYSTEM, WRITES, documents, seed
from conftest import kubectl_path
from fakekube import FakeKube
from test_escape_rebind import REBIND, backup_dirs, team_a
from test_escape_rebind_safety import ORIGINAL_DEPLOYMENTS, on_terminal, operator, settled
from test_find_flags_fix import RS

pytestmark = pytest.mark.e2e


def _kvdtype(env: dict, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([kubectl_path(), "kvdtype", *args], env=env, cwd=cwd, text=True, capture_output=True,
                          timeout=60, stdin=subprocess.DEVNULL)  # no terminal: a script, a CI job


def _written(fake: FakeKube) -> list:
    return [(r.method, r.path) for r in fake.requests
            if r.method in WRITES and "selfsubjectaccessreviews" not in r.path and r.query.get("dryRun") != "All"]


def _rebind(fake: FakeKube, env: dict, tmp_path: Path) -> tuple[list[str], str]:
    seed(fake, team_a())
    operator(fake)
    return ["escape", "rebind", *REBIND, "--apply"], "Carry out this plan? [y/N]:"


def _restore(fake: FakeKube, env: dict, tmp_path: Path) -> tuple[list[str], str]:
    """A rebind's backup, put back while the Setting is on and its Binding breaks its consumers:
    the one case restore asks about."""
    seed(fake, team_a())
    operator(fake)
    done = _kvdtype(env, tmp_path, "escape", "rebind", *REBIND, "--keep-old-binding", "--apply")
    assert done.returncode == 0, done.stderr
    (directory,) = backup_dirs(tmp_path)
    settled(fake)
    fake.update("settings", SYSTEM, SETTING, {"spec": {"value": "true"}, "status": {"value": "true"}})
    fake.remove("kvcachepoolbindings", "team-a", "legacy")
    for name in ORIGINAL_DEPLOYMENTS:
        fake.remove("modeldeployments", "team-a", name)
    return ["escape", "restore", str(directory), "--apply"], "Restore anyway? [y/N]:"


def _fix(fake: FakeKube, env: dict, tmp_path: Path) -> tuple[list[str], str]:
    seed(fake, documents(EXAMPLES) + [RS])
    return ["find-flags", "-n", "team-c", "--fix", "--apply"], "Patch 4 object(s)? [y/N]:"


#: Each write that plans by default: how to set it up, its command line and its question.
APPLIED: dict[str, Callable[[FakeKube, dict, Path], tuple[list[str], str]]] = {
    "escape rebind --apply": _rebind, "escape restore --apply": _restore, "find-flags --fix --apply": _fix}
#: The exit status of each once written: the fix leaves findings (objects it refused to patch).
DONE = {"escape rebind --apply": 0, "escape restore --apply": 0, "find-flags --fix --apply": 1}


@pytest.mark.parametrize("write", list(APPLIED))
def test_without_a_terminal_apply_is_the_consent_of_every_write_that_plans_first(fake, kube_env, tmp_path, write):
    args, question = APPLIED[write](fake, kube_env, tmp_path)
    fake.clear_log()
    result = _kvdtype(kube_env, tmp_path, *args)
    assert result.returncode == DONE[write], result.stderr
    assert _written(fake) and "[y/N]" not in result.stderr and "pass --yes" not in result.stderr


@pytest.mark.parametrize("write", list(APPLIED))
def test_on_a_terminal_every_write_asks_and_no_writes_nothing(fake, kube_env, tmp_path, monkeypatch, write):
    args, question = APPLIED[write](fake, kube_env, tmp_path)
    fake.clear_log()
    code, _, err = on_terminal(args, dict(kube_env), "n\n", tmp_path, monkeypatch)
    assert code == 3 and question in err and "not confirmed; nothing was changed" in err, err
    assert _written(fake) == []


def test_escape_off_and_on_need_yes_without_a_terminal_and_say_why_in_their_help(fake, kube_env, tmp_path,
                                                                                  monkeypatch):
    seed(fake, team_a())
    fake.clear_log()
    refused = _kvdtype(kube_env, tmp_path, "escape", "off")
    assert refused.returncode == 2 and "stdin is not a terminal, so pass --yes" in refused.stderr
    assert _written(fake) == []
    code, _, err = on_terminal(["escape", "off"], dict(kube_env), "n\n", tmp_path, monkeypatch)
    assert code == 3 and "Turn the Setting off? [y/N]:" in err and _written(fake) == []
    done = _kvdtype(kube_env, tmp_path, "escape", "off", "--yes")
    assert done.returncode == 0, done.stderr
    assert fake.get("settings", SYSTEM, SETTING)["spec"]["value"] == "false"
    for action in ("off", "on"):
        shown = " ".join(_kvdtype(kube_env, tmp_path, "escape", action, "--help").stdout.split())
        assert "without a terminal it is needed: the action is the write, cluster-wide, with no plan first and " \
               "no --apply" in shown
    for args in (["escape", "rebind", "--help"], ["escape", "restore", "--help"], ["find-flags", "--help"]):
        shown = " ".join(_kvdtype(kube_env, tmp_path, *args).stdout.split())
        assert "without a terminal, --apply is the consent: nothing is asked" in shown, args
