"""``kubectl kvdtype check``: every Binding's dtype against the engines that consume it.

Replaces Step 1 of the upgrade guide. The judgement itself is ``_judging.bindings``'s (``escape`` and
``verify`` share it); this module is the command line around it.
"""

from __future__ import annotations

from kubectl_kvdtype._commands.command import Command, Context
from kubectl_kvdtype._judging.bindings import BindingInventory, build_check_report, pods_judged
from kubectl_kvdtype._judging.guard import GUARD_NOTED, guard_gets, note_guard
from kubectl_kvdtype._judging.managed import index, name_managers, read_owners_early, reader_for
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
        reader = reader_for(context.source, context.offline)
        # The owners of the Pods the report will name, read while the deployments are still coming:
        # the Pods' findings are theirs alone (``pods_judged``).
        early = None if context.offline else lambda bindings, pods: read_owners_early(
            pods_judged(bindings, pods, context.system_namespace), reader, pods)
        inventory = BindingInventory.read(context.source, context.namespace, context.system_namespace,
                                          beside=() if context.offline else guard_gets(GUARD_NOTED), early=early)
        report = build_check_report(inventory, context.system_namespace, offline=context.offline)
        reader.known = index((BINDING.name, inventory.bindings), (DEPLOYMENT.name, inventory.deployments),
                             (POD.name, inventory.pods))
        name_managers(report, reader, item_kind=BINDING.name)
        if not context.offline:
            note_guard(report, inventory.beside)
        return report
