"""The kubectl-style global flags, shared by every parser and sub-parser of the command line.

kubectl passes no flags to a plugin, so the plugin parses kubectl's own (``--kubeconfig``,
``--context``, ``-n``, ``-A``...) and accepts each of them before or after the subcommand: they are
defined on every parser with suppressed defaults, and ``DEFAULTS`` fills what was not given.
"""

from __future__ import annotations

import argparse
import re
from typing import Optional

from kubectl_kvdtype._render import OUTPUTS
from kubectl_kvdtype._status import UsageError

#: Seconds one API request may take, retries included, unless --request-timeout says otherwise.
DEFAULT_REQUEST_TIMEOUT = 30.0

#: Global flags' defaults, applied after parsing so a flag given after the subcommand is not
#: overwritten by the subcommand parser's default (the flags are defined on both parsers).
DEFAULTS = {
    "kubeconfig": None, "context": None, "namespace": None, "all_namespaces": False,
    "request_timeout": DEFAULT_REQUEST_TIMEOUT, "as_user": None, "output": "table", "no_headers": False,
    "filename": [], "system_namespace": "gpustack-system", "exit_zero": False, "ignore": [],
}
APPENDED = ("filename", "ignore")

#: What a usage error about a duration shows.
DURATION_FORMS = "accepted forms: 10m, 90s, 1m30s, 500ms, 1h, or plain seconds"
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds from kubectl-style durations: ``30s``, ``1m30s``, ``500ms``, or plain seconds."""
    value = text.strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", value):
        return float(value)
    parts = _DURATION.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r} ({DURATION_FORMS})")
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)


def _request_timeout(text: str) -> Optional[float]:
    seconds = parse_duration(text)
    return seconds or None  # kubectl: "0" means no timeout


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one sentence and exit status 2 via UsageError."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see '{self.prog} --help')")


def add_global_flags(parser: argparse.ArgumentParser, suffix: str = "") -> None:
    """The kubectl flags; ``suffix`` keeps the subcommand's appended lists apart to merge them."""
    flags = parser.add_argument_group("global flags (also accepted before the subcommand)")
    s = argparse.SUPPRESS
    flags.add_argument("--kubeconfig", default=s, metavar="PATH", help="path to the kubeconfig file")
    flags.add_argument("--context", default=s, help="the kubeconfig context to use")
    flags.add_argument("-n", "--namespace", default=s, help="the namespace in scope (default: the context's)")
    flags.add_argument("-A", "--all-namespaces", action="store_true", default=s, help="every namespace")
    flags.add_argument("--request-timeout", type=_request_timeout, default=s, metavar="DURATION",
                       help="how long one API request may take, retries included (default 30s, where "
                            "kubectl has no limit; 0: no limit)")
    flags.add_argument("--as", dest="as_user", default=s, metavar="USER", help="impersonate this user")
    flags.add_argument("-o", "--output", choices=OUTPUTS, default=s, help="table (default), wide, json or yaml")
    flags.add_argument("--no-headers", action="store_true", default=s, help="tables without headers and summary")
    flags.add_argument("-f", "--filename", action="append", dest="filename" + suffix, default=s, metavar="PATH",
                       help="read objects from manifests instead of a cluster: a file, a directory, or - (repeatable)")
    flags.add_argument("--system-namespace", default=s, metavar="NAMESPACE",
                       help="the operator's namespace, where the Setting lives (default gpustack-system)")
    flags.add_argument("--exit-zero", action="store_true", default=s, help="exit 0 even with error findings")
    flags.add_argument("--ignore", action="append", dest="ignore" + suffix, default=s, metavar="CODE",
                       help="drop findings with this code (repeatable)")


