"""README's first steps, as a newcomer runs them (issue 39): after its first command (a venv with
an editable install in the checkout), the block that follows it runs as written: kubectl finds the
plugin on PATH, and ``man kubectl-kvdtype`` finds the page the checkout holds (an editable install
puts no data files in the venv, so the page is found through MANPATH).

The first command itself (a fresh venv and ``pip install -e .``, a minute of downloads and builds)
is not run here: the checkout is laid out as it leaves it, with this run's console script as
``.venv/bin/kubectl-kvdtype``, and the block's lines run as a shell runs them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from _support import PLUGIN, ROOT
from conftest import kubectl_path

pytestmark = [pytest.mark.e2e, pytest.mark.version_sensitive]  # kubectl, man, a shell; the man page (test_tiers.py)

README = (ROOT / "README.md").read_text(encoding="utf-8")
FIRST_COMMAND = "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/kubectl-kvdtype check -f examples/"


def _blocks() -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```", README, re.M | re.S)


def _after_the_first_command() -> list[str]:
    """The lines of the bash block that follows README's first command."""
    blocks = _blocks()
    first = next(index for index, block in enumerate(blocks) if block.strip() == FIRST_COMMAND)
    return [line.split("  #")[0].strip() for line in blocks[first + 1].splitlines() if line.strip()]


def test_the_first_command_is_the_first_block_and_the_next_sets_the_paths():
    assert _blocks()[0].strip() == FIRST_COMMAND
    lines = _after_the_first_command()
    assert lines[0] == 'export PATH="$PWD/.venv/bin:$PATH" MANPATH="$PWD/man:$MANPATH"'
    assert any(line.startswith("kubectl kvdtype ") for line in lines) and "man kubectl-kvdtype" in lines


def test_the_page_is_where_the_checkout_keeps_it_and_the_wheel_installs_it():
    """``MANPATH="$PWD/man:"`` finds a page only in a section directory under ``man/``; the wheel's
    data_files put the same file in ``<prefix>/share/man/man1``."""
    assert (ROOT / "man" / "man1" / "kubectl-kvdtype.1").is_file()
    assert "share/man/man1 = man/man1/kubectl-kvdtype.1" in (ROOT / "setup.cfg").read_text(encoding="utf-8")


@pytest.mark.skipif(not (shutil.which("man") and shutil.which("groff")), reason="man or groff is not installed "
                    "(.ci/run installs them)")
def test_the_block_after_the_first_command_runs_as_written(tmp_path):
    version = subprocess.run(["man", "--version"], capture_output=True, text=True, timeout=30)
    if version.returncode != 0:  # a minimized image's stand-in for man (it prints how to restore it)
        pytest.skip(f"man is not a working man: {version.stdout.strip() or version.stderr.strip()}")
    checkout = tmp_path / "kubectl-kvdtype"
    (checkout / ".venv" / "bin").mkdir(parents=True)
    (checkout / ".venv" / "bin" / "kubectl-kvdtype").symlink_to(PLUGIN)
    for name in ("man", "examples"):
        (checkout / name).symlink_to(ROOT / name)
    env = {"HOME": str(tmp_path), "MANPAGER": "cat", "PAGER": "cat", "MANWIDTH": "100", "NO_COLOR": "1",
           "PATH": os.pathsep.join([str(Path(kubectl_path()).parent), "/usr/bin", "/bin"])}
    outputs = {}
    for line in _after_the_first_command()[1:]:
        script = f"{_after_the_first_command()[0]}\n{line}"
        outputs[line] = subprocess.run(["bash", "--norc", "--noprofile", "-c", script], cwd=checkout, env=env,
                                       capture_output=True, text=True, timeout=120)
    tour = next(result for line, result in outputs.items() if line.startswith("kubectl kvdtype "))
    assert tour.returncode == 1 and "legacy" in tour.stdout and "rejected" in tour.stdout, tour.stderr
    page = outputs["man kubectl-kvdtype"]
    assert page.returncode == 0, page.stderr
    assert page.stdout.split()[0] == "KUBECTL-KVDTYPE(1)" and "EXIT STATUS" in page.stdout
