"""The linters once, then the tests on every supported Python: `nox` (README.md, "Run the tests";
.ci/run runs it).

`lint`: ruff and mypy, as pinned in the `test` extra and configured in pyproject.toml. `tests`: one
session per supported minor version, each in its own venv under .nox/ with the `test` extra:

- the release Python (the one .github/workflows/release.yml builds the binary with) runs the whole
  suite, and installs the `build` extra, so the man page and the binary are built and tested
  there, once: they are artifacts of that one Python;
- the others run the fast tier and every end-to-end test whose outcome depends on the Python
  (marker `version_sensitive`: argparse, the argv reader, completion, the man page; the rule is
  tests/test_tiers.py's). The rest of the end-to-end tier talks HTTP to a fake server or to the
  real control plane (the `real` tests: kube-apiserver and etcd) through kubectl and the plugin's
  own process, which the Python version does not change; running it again on every version
  doubled CI's time for no test that could fail differently.

Every test session runs pytest-xdist workers (`WORKERS`) and ends with a line giving its wall
time, the machine's cores and its load average, so a slow run says whether the machine was busy.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import time
from pathlib import Path

import nox

#: The versions setup.cfg's python_requires and classifiers claim; keep the three in step
#: (tests/test_packaging.py checks it).
SUPPORTED = ("3.10", "3.11", "3.12", "3.13")
#: The Python the release binary is built with (release.yml's setup-python).
RELEASE_PYTHON = "3.11"
#: The Pythons that run the whole suite: the release one.
WHOLE_SUITE = (RELEASE_PYTHON,)
#: What the other Pythons run: the fast tier and the end-to-end tests that depend on the Python.
VERSION_SENSITIVE = "not e2e or version_sensitive"
#: pytest-xdist workers per session: one per core. The binary's build (one worker, see below) takes
#: as long as the rest of the suite on the other core; more workers than cores made the deadline
#: tests' margins thinner on a loaded machine for no shorter run (docs/development.md, "CI").
WORKERS = "auto"
# With --dist loadgroup, tests go to any free worker except those of one xdist_group, which share
# one: tests/test_release.py's, whose session fixtures build the binary once, and the real tests'
# (tests/conftest.py), which share the run's one control plane. The biggest groups go out first,
# so the two run beside each other while the other tests fill in around them.
#: Where pyenv keeps its interpreters; they are not all on PATH (only the global one's shims work).
PYENV_ROOT = Path(os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv")))

nox.options.sessions = ["lint", "tests"]
# uv makes each session's venv and installs into it: pip took minutes a session to resolve the same
# extras (docs/development.md, "CI"). nox finds the uv that the `ci` extra put beside it.
nox.options.default_venv_backend = "uv"
# Only the interpreters on this machine: nothing is downloaded at run time (nox's own rule, and
# uv's, for any uv that nox runs).
nox.options.download_python = "never"
os.environ["UV_PYTHON_DOWNLOADS"] = "never"
# Bytecode is kept, as an installed package keeps it: uv compiles what it installs (pip does by
# default), and the package's own modules are cached on first import. With PYTHONDONTWRITEBYTECODE
# set, as some machines set it, every plugin process a test starts would compile the package
# again, which no user's run does.
os.environ["UV_COMPILE_BYTECODE"] = "1"
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
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


def _say_time(session: nox.Session, started: float) -> None:
    """One line: the session's wall time, with what the machine had to give it."""
    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    session.log(f"{session.name}: {time.monotonic() - started:.0f} s wall on {os.cpu_count()} cores "
                f"(nproc), load average {load}")


@nox.session(python=list(SUPPORTED))
def tests(session: nox.Session) -> None:
    """pytest over tests/ on one Python: the whole suite on WHOLE_SUITE, else VERSION_SENSITIVE."""
    started = time.monotonic()
    extras = "test,build" if session.python == RELEASE_PYTHON else "test"
    selection = [] if session.python in WHOLE_SUITE else ["-m", VERSION_SENSITIVE]
    try:
        # pip too: tests/test_manpage.py builds the wheel with it, as a packager would; a uv venv has none.
        session.install("--quiet", "-e", f".[{extras}]", "pip")
        session.run("python", "-m", "pytest", "-q", "-n", WORKERS, "--dist", "loadgroup", *selection, *session.posargs)
    finally:
        _say_time(session, started)


@nox.session(python=RELEASE_PYTHON)
def lint(session: nox.Session) -> None:
    """ruff check, mypy and import-linter's layers, with setup.cfg's pinned versions and
    pyproject.toml's rules.

    Once, on the release Python: mypy checks for the oldest supported one (python_version in
    pyproject.toml) whichever runs it. Arguments go to ruff (`nox -s lint -- --fix`)."""
    started = time.monotonic()
    try:
        session.install("--quiet", "-e", ".[test]")
        session.run("ruff", "check", *session.posargs)
        session.run("mypy")
        session.run("lint-imports")
    finally:
        _say_time(session, started)
