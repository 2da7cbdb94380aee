"""The plugin's own environment settings: one table, read through one validated reader.

Every ``KUBECTL_KVDTYPE_*`` variable the package reads is a row of ``SETTINGS``: its name, what it
does (the help text docs/reference.md and the man page's ENVIRONMENT section say), what it takes
(a whole number within bounds, seconds, a switch, a path), its default, and whether users are told
of it or it is for tests. ``check`` validates them all once, at the start of a run, so a bad value
is one sentence and exit status 2 (a usage error: the value cannot be taken) before anything is
read; ``value`` then gives the typed value. Code that must never fail on a bad value (the progress
line, completion, the internal-error handler) asks ``value_or_default``. ``tests/test_settings.py``
checks that every such name in the package is a row and that the docs' tables are these rows.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Optional

from kubectl_kvdtype._kits.display import cut
from kubectl_kvdtype._kits.records import record_type
from kubectl_kvdtype._kits.status import UsageError

#: ``Setting.kind``: a whole number from ``low`` to ``high`` (ASCII digits only); seconds, a
#: decimal number from ``low`` to ``high``; a switch (the words below); a path to a file.
WHOLE = "whole"
SECONDS = "seconds"
SWITCH = "switch"
PATH = "path"
DIRECTORY = "directory"
#: ``Setting.audience``: documented to users (docs/reference.md), or for tests only
#: (docs/development.md, "Test-only settings").
USER = "user"
TEST = "test"
#: The words a switch (and kubectl's boolean flags, ``--insecure-skip-tls-verify=true``) take.
TRUE_WORDS = ("true", "1", "t", "yes")
FALSE_WORDS = ("false", "0", "f", "no")


@record_type(frozen=True)
class Setting:
    """One environment setting of the plugin."""

    name: str
    #: What it does, one sentence: docs/reference.md's table and the man page say it.
    help: str
    kind: str
    default: Any
    low: float = 0
    high: float = 0
    unit: str = ""
    audience: str = USER

    @property
    def takes(self) -> str:
        """What a value must be, as the docs and a refusal say it."""
        if self.kind == WHOLE:
            return f"a whole number of {self.unit} from {int(self.low)} to {int(self.high)}"
        if self.kind == SECONDS:
            return f"a number of seconds from {self.low:g} to {self.high:g}"
        if self.kind == SWITCH:
            return "1 or 0 (also true/false, yes/no)"
        return "the path of a directory" if self.kind == DIRECTORY else "the path of a file"

    @property
    def default_text(self) -> str:
        """The default as the docs and the man page say it."""
        if self.kind == SWITCH:
            return "0"
        if self.default is None or isinstance(self.default, str):
            return "none" if self.default is None else self.default
        return f"{self.default:g}"

    def parse(self, text: str) -> Any:
        """The typed value of ``text`` (unset or blank: the default); a bad one raises UsageError."""
        stripped = text.strip()
        if not stripped:
            return self.default
        value = self._typed(stripped)
        if value is None:
            raise UsageError(f"{self.name} must be {self.takes}, not {cut(text)!r}")
        return value

    def _typed(self, text: str) -> Any:
        if self.kind == WHOLE:
            if not (text.isascii() and text.isdigit()) or len(text) > 20:
                return None
            number = int(text)
            return number if self.low <= number <= self.high else None
        if self.kind == SECONDS:
            try:
                seconds = float(text) if text.isascii() else math.nan
            except ValueError:
                return None
            return seconds if math.isfinite(seconds) and self.low <= seconds <= self.high else None
        if self.kind == SWITCH:
            word = text.lower()
            return True if word in TRUE_WORDS else False if word in FALSE_WORDS else None
        return text


DEBUG = Setting("KUBECTL_KVDTYPE_DEBUG", "1: an internal error also prints its traceback (credentials redacted)",
                SWITCH, False)
ENGINE_TABLES = Setting(
    "KUBECTL_KVDTYPE_ENGINE_TABLES", "an extra recorded engine table file (scripts/engine-tables --only "
    "ENGINE==VERSION --out FILE), for an engine release newer than the plugin's data; verdicts that rest on it say so",
    PATH, None)
MAX_FILE_MB = Setting(
    "KUBECTL_KVDTYPE_MAX_FILE_MB", "the most -f reads of one file or of standard input, in MiB", WHOLE, 512,
    1, 1 << 20, "MiB")
MAX_PAGES = Setting(
    "KUBECTL_KVDTYPE_MAX_PAGES",
    "the most pages (of 500 objects or more) one LIST may take before it is abandoned as endless; a LIST read in one "
    "request may hold 500 objects for each",
    WHOLE, 1000, 1, 10 ** 9, "pages")
PAGED_LISTS = Setting(
    "KUBECTL_KVDTYPE_PAGED_LISTS",
    "1: every LIST read in pages, the first of 500 objects, as kubectl reads them, where each is otherwise one request "
    "whose objects are decoded as they arrive (the kubernetes client's transport always reads pages)",
    SWITCH, False)
COMPLETION_TIMEOUT = Setting(
    "KUBECTL_KVDTYPE_COMPLETION_TIMEOUT", "seconds shell completion waits for names from the cluster", SECONDS, 2.0,
    0, 60)
PROGRESS_DELAY = Setting(
    "KUBECTL_KVDTYPE_PROGRESS_DELAY", "seconds before the progress line first shows on a terminal; 0 shows it at once, "
    "so a test of the line does not depend on how long the work takes on its machine", SECONDS, 1.0, 0, 3600,
    audience=TEST)
SERVICE_ACCOUNT_DIR = Setting(
    "KUBECTL_KVDTYPE_SERVICE_ACCOUNT_DIR", "the directory the in-cluster service account's token, ca.crt and "
    "namespace are read from, as kubectl reads them in a Pod; a test gives its own", DIRECTORY,
    "/var/run/secrets/kubernetes.io/serviceaccount", audience=TEST)

#: Every setting, in the order the docs list them.
SETTINGS: tuple[Setting, ...] = (DEBUG, ENGINE_TABLES, MAX_FILE_MB, MAX_PAGES, PAGED_LISTS, COMPLETION_TIMEOUT,
                                 PROGRESS_DELAY, SERVICE_ACCOUNT_DIR)


def check(environ: Mapping[str, str], settings: tuple[Setting, ...] = SETTINGS) -> None:
    """Every setting's value is one it can take: else a usage error naming the first bad one."""
    for setting in settings:
        setting.parse(environ.get(setting.name, ""))


def value(environ: Mapping[str, str], setting: Setting) -> Any:
    """The typed value of ``setting`` (its default when unset); a bad one raises UsageError."""
    return setting.parse(environ.get(setting.name, ""))


def value_or_default(environ: Mapping[str, str], setting: Setting) -> Any:
    """The typed value, or the default for a bad one: for code that must not fail over it (the
    progress line, completion, the internal-error handler); ``check`` has said it at the start."""
    try:
        return value(environ, setting)
    except UsageError:
        return setting.default


def named(name: str) -> Optional[Setting]:
    return next((s for s in SETTINGS if s.name == name), None)
