"""A lease annotation that is no lease this tool wrote (garbage, 200 kB long, nested deep, an absurd
pid) is refused in one bounded sentence that says how to clear it (the exact ``kubectl annotate``
command, which works), and the refused run leaves nothing behind: no backup directory, no write.
Through the real kubectl against the fake API server (issue 40)."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pytest

from _support import WRITES, seed
from conftest import kubectl_path
from test_escape_rebind import LEASE, REBIND, kvdtype, team_a

pytestmark = pytest.mark.e2e

CLEAR = f"kubectl annotate kvcachepoolbinding legacy -n team-a {LEASE}-"
FUTURE = "2999-01-01T00:00:00Z"

FORGED = {
    "garbage": "not a lease {{{",
    "a list": "[1, 2, 3]",
    "200 kB": json.dumps({"holder": "h" * 200_000, "host": "elsewhere", "pid": 7, "expires": FUTURE,
                          "journal": "/tmp/x"}),
    "nested deep": "[" * 100_000 + "]" * 100_000,
    "nested deep, short": "[" * 3000 + "]" * 3000,
    "no expiry": json.dumps({"host": "elsewhere", "pid": 7}),
    "absurd pid": json.dumps({"host": socket.gethostname(), "pid": 10 ** 30, "expires": FUTURE}),
    "pid 0": json.dumps({"host": socket.gethostname(), "pid": 0, "expires": FUTURE}),
    "pid -1": json.dumps({"host": socket.gethostname(), "pid": -1, "expires": FUTURE}),
    "pid true": json.dumps({"host": socket.gethostname(), "pid": True, "expires": FUTURE}),
    "control characters": json.dumps({"holder": "x\x1b[2J\nFORGED", "host": "elsewhere\u202e", "pid": 7,
                                      "expires": FUTURE, "journal": "/tmp/\x07"}),
}


def _with_lease(value: str) -> list[dict]:
    objects = team_a()
    for obj in objects:
        if obj["kind"] == "KVCachePoolBinding" and obj["metadata"]["name"] == "legacy":
            obj["metadata"].setdefault("annotations", {})[LEASE] = value
    return objects


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """The directory the rebind runs in, where its backup directory would go (the kubeconfig is beside it)."""
    where = tmp_path / "work"
    where.mkdir()
    return where


def _object_writes(fake) -> list:
    return [(r.method, r.path) for r in fake.requests
            if r.method in WRITES and "selfsubjectaccessreviews" not in r.path]


@pytest.mark.parametrize("name", sorted(FORGED))
def test_a_forged_lease_is_refused_leaving_nothing_and_saying_how_to_clear_it(fake, kube_env, work, name):
    seed(fake, _with_lease(FORGED[name]))
    fake.clear_log()
    result = kvdtype(kube_env, work, *REBIND, "--apply")
    assert result.returncode == 3, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in result.stderr and "internal error" not in result.stderr, \
        result.stderr[:2000]
    assert CLEAR in errors[0], errors[0][:2000]
    assert len(errors[0]) < 2000, len(errors[0])  # the annotation's value is not echoed whole
    assert not [c for c in errors[0] if not c.isprintable()]
    assert list(work.iterdir()) == [], list(work.iterdir())  # no backup directory left behind
    assert _object_writes(fake) == []
    assert fake.get("kvcachepoolbindings", "team-a", "legacy")["metadata"]["annotations"][LEASE] == FORGED[name]


def test_the_command_said_clears_the_lease_and_the_rebind_then_runs(fake, kube_env, work):
    seed(fake, _with_lease(FORGED["absurd pid"]))
    refused = kvdtype(kube_env, work, *REBIND, "--apply")
    assert refused.returncode == 3 and CLEAR in refused.stderr
    cleared = subprocess.run([kubectl_path(), *CLEAR.split()[1:]], env=kube_env, text=True, capture_output=True,
                             timeout=60)
    assert cleared.returncode == 0, cleared.stderr
    assert LEASE not in (fake.get("kvcachepoolbindings", "team-a", "legacy")["metadata"].get("annotations") or {})
    done = kvdtype(kube_env, work, *REBIND, "--apply")
    assert done.returncode == 0, done.stderr


def test_a_held_lease_is_refused_with_the_holder_cut_short_and_nothing_left(fake, kube_env, work):
    held = json.dumps({"holder": "bastion pid 4242 " + "x" * 5000, "host": "bastion", "pid": 4242,
                       "expires": FUTURE, "journal": "/home/admin/kvdtype-backup-team-a-legacy-1/"})
    seed(fake, _with_lease(held))
    fake.clear_log()
    result = kvdtype(kube_env, work, *REBIND, "--apply")
    assert result.returncode == 3
    assert "another escape rebind of team-a/legacy is running" in result.stderr and CLEAR in result.stderr
    assert len(result.stderr) < 2000 and list(work.iterdir()) == [] and _object_writes(fake) == []


def test_an_expired_lease_is_still_taken_over(fake, kube_env, work):
    seed(fake, _with_lease(json.dumps({"host": "bastion", "pid": 4242, "expires": "2000-01-01T00:00:00Z"})))
    result = kvdtype(kube_env, work, *REBIND, "--apply")
    assert result.returncode == 0, result.stderr


def test_an_empty_backup_dir_given_is_kept_when_the_lease_is_refused(fake, kube_env, work):
    seed(fake, _with_lease(FORGED["garbage"]))
    given = work / "mine"
    given.mkdir()
    result = kvdtype(kube_env, work, *REBIND, "--backup-dir", str(given), "--apply")
    assert result.returncode == 3 and CLEAR in result.stderr
    assert given.is_dir() and list(given.iterdir()) == [] and [p.name for p in work.iterdir()] == ["mine"]
