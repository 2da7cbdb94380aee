"""``kubectl kvdtype verify [DEPLOYMENT]``: what the replicas and injected Pods really run.

Replaces the Verification section of the upgrade guide. This module is the command line: its
flags, typed (``VerifyOptions``), and ``--wait``'s value told apart from the deployment's name;
the judgement of each Pod is ``_judging.replicas``', the polls of ``--wait`` ``_judging.rollout``'s.
"""

from __future__ import annotations

import argparse
from typing import Optional, Sequence

from kubectl_kvdtype._commands.command import Command, Context
from kubectl_kvdtype._commands.flags import parse_duration
from kubectl_kvdtype._judging import rollout as _rollout
from kubectl_kvdtype._kits.records import record_type
from kubectl_kvdtype._kits.report import Report
from kubectl_kvdtype._kits.status import UsageError
from kubectl_kvdtype._sources import names as _names

DEFAULT_WAIT = 600.0


@record_type(frozen=True)
class VerifyOptions:
    """verify's own flags, typed, read from the parsed command line at this boundary (a name it
    does not have is an error, never a default)."""

    deployment: Optional[str]
    wait: Optional[str]
    #: The command line as typed: how a value was attached (``--wait=X``) is not in the namespace.
    argv: tuple[str, ...]
    poll_interval: Optional[float]

    @classmethod
    def of(cls, options: argparse.Namespace) -> "VerifyOptions":
        return cls(deployment=options.deployment, wait=options.wait, argv=tuple(options.argv),
                   poll_interval=options.poll_interval)


class VerifyCommand(Command):
    name = "verify"
    examples = (
        ("right after the upgrade: wait until every replica runs its Binding's dtype",
         "kubectl kvdtype verify -A --wait"),
        ("one deployment", "kubectl kvdtype verify qwen-chat -n team-a"),
    )
    description = (
        "Read the engine container of each replica of a pool-attached ModelDeployment (or of every "
        "one in scope, and every injected Pod) and compare the --kv-cache-dtype the engine runs with "
        "the Binding's dtype. --wait polls until every judged Pod passes or the time is up. "
        "Replaces the Verification section of the upgrade guide."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("deployment", nargs="?", metavar="DEPLOYMENT",
                            help="a ModelDeployment (namespace from -n or the context); default: everything in scope")
        parser.add_argument("--wait", nargs="?", const="10m", default=None, metavar="DURATION",
                            help="poll until every judged Pod passes, at most DURATION (default 10m)")
        # Hidden: seconds between polls (default: a twentieth of --wait, between 0.05s and 2s).
        parser.add_argument("--poll-interval", type=parse_duration, default=None, help=argparse.SUPPRESS)

    def run(self, context: Context) -> Report:
        options = VerifyOptions.of(context.options)
        name, wait = _name_and_wait(options.deployment, options.wait, list(options.argv))
        _names.check_flag("ModelDeployment name", name, _names.SUBDOMAIN)  # `--wait NAME` gives it back here
        if wait is not None and context.offline:
            raise UsageError("--wait polls a cluster; it cannot be used with -f")
        return _rollout.verify(context, name, wait, options.poll_interval)


def _name_and_wait(name: Optional[str], wait: Optional[str],
                   argv: Sequence[str] = ()) -> tuple[Optional[str], Optional[float]]:
    """``--wait NAME`` reads NAME as the wait's value (argparse's optional value): take it back.
    ``--wait=X`` is always a duration."""
    if wait is None:
        return name, None
    try:
        return name, parse_duration(wait)
    except argparse.ArgumentTypeError as error:
        attached = any(arg.startswith("--w") and arg.endswith(f"={wait}") for arg in argv)
        if name is None and not attached:
            return wait, DEFAULT_WAIT
        raise UsageError(f"--wait={wait}: {error}") from None
