"""The linters once, then the whole test suite on every supported Python: `nox` (README.md, "Run the
tests"; .ci/run runs it).

`lint`: ruff and mypy, as pinned in the `test` extra and configured in pyproject.toml. `tests`: one
session per supported minor version, each in its own venv under .nox/ with the `test` extra.
The session on the release Python (the one .github/workflows/release.yml builds the binary with)
also installs the `build` extra, so the man page and the binary are built and tested there,
once, rather than on every version: they are artifacts of that one Python.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
from pathlib import Path

import nox

#: The versions setup.cfg's python_requires and classifiers claim; keep the three in step
#: (tests/test_packaging.py checks it).
SUPPORTED = ("3.10", "3.11", "3.12", "3.13")
#: The Python the release binary is built with (release.yml's setup-python).
RELEASE_PYTHON = "3.11"
#: Where pyenv keeps its interpreters; they are not all on PATH (only the global one's shims work).
PYENV_ROOT = Path(os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv")))

nox.options.sessions = ["lint", "tests"]
nox.options.default_venv_backend = "venv"
# Only the interpreters on this machine: nothing is downloaded at run time.
nox.options.download_python = "never"
# On CI a supported version that this machine lacks fails the run instead of being skipped.
nox.options.error_on_missing_interpreters = os.environ.get("CI", "").lower() in ("true", "1", "yes")


def _pyenv_bindir(version: str) -> Path | None:
    """The bin directory of pyenv's newest patch release of ``version`` (3.12 -> 3.12.1), if any."""
    found = []
    for bindir in glob.glob(str(PYENV_ROOT / "versions" / f"{version}.*" / "bin")):
        patch = re.fullmatch(rf"{re.escape(version)}\.(\d+)", Path(bindir).parent.name)
        if patch and (Path(bindir) / f"python{version}").is_file():
            found.append((int(patch.group(1)), Path(bindir)))
    return max(found)[1] if found else None


def _put_interpreters_on_path() -> None:
    """Let nox find python3.X for every supported X: pyenv's real interpreters go before PATH, so
    neither a missing one nor pyenv's shim for a version that is not active is picked instead."""
    bindirs = [str(d) for d in map(_pyenv_bindir, SUPPORTED) if d is not None]
    os.environ["PATH"] = os.pathsep.join([*bindirs, os.environ.get("PATH", "")])
    for version in SUPPORTED:
        where = shutil.which(f"python{version}") or "missing"
        print(f"noxfile: python{version}: {where}")


_put_interpreters_on_path()


@nox.session(python=list(SUPPORTED))
def tests(session: nox.Session) -> None:
    """pytest over tests/, as `./scripts/test` runs it, on one Python."""
    extras = "test,build" if session.python == RELEASE_PYTHON else "test"
    session.install("--disable-pip-version-check", "--quiet", "-e", f".[{extras}]")
    session.run("python", "-m", "pytest", "-q", *session.posargs)


@nox.session(python=RELEASE_PYTHON)
def lint(session: nox.Session) -> None:
    """ruff check and mypy, with setup.cfg's pinned versions and pyproject.toml's rules.

    Once, on the release Python: mypy checks for the oldest supported one (python_version in
    pyproject.toml) whichever runs it. Arguments go to ruff (`nox -s lint -- --fix`)."""
    session.install("--disable-pip-version-check", "--quiet", "-e", ".[test]")
    session.run("ruff", "check", *session.posargs)
    session.run("mypy")
