"""``kubectl kvdtype preflight``: may I upgrade now, and if not, what exactly do I do first?

This module is the command line; the judgement, GO, NO-GO or INCOMPLETE, is
``_judging.readiness``', and the to-do list behind it ``_judging.todo``'s.
"""

from __future__ import annotations

from kubectl_kvdtype._commands.command import Command, Context
from kubectl_kvdtype._judging import readiness as _readiness
from kubectl_kvdtype._kits.report import Report


class PreflightCommand(Command):
    name = "preflight"
    description = (
        "Runs the judgements of check and find-flags, reads the Setting (is the dtype enforced yet?), "
        "and dry-runs the upgrade: for every role of a pool-attached ModelDeployment and every Pod opted "
        "into injection, the argv the upgraded operator or webhook renders, parsed as that engine at that "
        "version parses it (-o wide shows each one's predicted outcome). Prints an ordered to-do list with "
        "the command for each item, then GO, or NO-GO while an error finding remains, or INCOMPLETE (never GO) "
        "when a kind that could change the verdict could not be read. Exit 0 GO, 1 NO-GO, 3 could not complete, "
        "4 INCOMPLETE; --exit-zero gives 0 for GO and NO-GO, never for 3 or 4."
    )
    examples = (
        ("start here: is the whole cluster ready for the upgrade?", "kubectl kvdtype preflight -A"),
        ("every role's predicted outcome, and warnings make it NO-GO too",
         "kubectl kvdtype preflight -n team-a -o wide --fail-on warning"),
        ("a CI gate over a dump, never failing the job", "kubectl kvdtype preflight -f dump.yaml -o json --exit-zero"),
    )

    def run(self, context: Context) -> Report:
        return _readiness.preflight(context)
