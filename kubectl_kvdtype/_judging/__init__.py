"""Each subcommand's judgement, one module for what it judges: the Bindings (``bindings``), the
flags roles and Pods pass themselves (``flags``), the replicas (``replicas``) and whether their
rollout is done (``rollout``), the upgrade's dry run (``upgrade``), the go/no-go (``readiness``)
and its to-do list (``todo``), and who manages what was found (``managed``). Reads, never writes.
"""
