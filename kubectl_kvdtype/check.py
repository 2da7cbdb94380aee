"""``kubectl kvdtype check``: every Binding's dtype against the engines that consume it.

Replaces Step 1 of the upgrade guide. The judgement itself is ``_judging.bindings``'s (``escape`` and
``verify`` share it); this module is the command line around it.
"""

from __future__ import annotations

from kubectl_kvdtype._commands.command import Command, Context
from kubectl_kvdtype._judging.bindings import BindingInventory, build_check_report
from kubectl_kvdtype._judging.guard import GUARD_NOTED, guard_gets, note_guard
from kubectl_kvdtype._judging.managed import name_managers, reader_for
from kubectl_kvdtype._kits.report import Report
from kubectl_kvdtype._sources.kinds import BINDING, DEPLOYMENT, POD


class CheckCommand(Command):
    name = "check"
    description = (
        "For every KVCachePoolBinding in scope: its dtype, the ModelDeployments and injected Pods "
        "that consume it, whether each engine accepts the spelling, the fix, and what the upgrade "
        "will roll. Replaces Step 1 of the upgrade guide."
    )
    examples = (
        ("every Binding in the cluster", "kubectl kvdtype check -A"),
        ("one namespace, with each Binding's domain and consumers", "kubectl kvdtype check -n team-a -o wide"),
        ("a dump instead of a cluster", "kubectl kvdtype check -f dump.yaml -o json"),
    )

    def run(self, context: Context) -> Report:
        inventory = BindingInventory.read(context.source, context.namespace, context.system_namespace,
                                          beside=() if context.offline else guard_gets(GUARD_NOTED))
        report = build_check_report(inventory, context.system_namespace, offline=context.offline)
        name_managers(report, reader_for(context.source, context.offline, (BINDING.name, inventory.bindings),
                                         (DEPLOYMENT.name, inventory.deployments), (POD.name, inventory.pods)),
                      item_kind=BINDING.name)
        if not context.offline:
            note_guard(report, inventory.beside)
        return report
