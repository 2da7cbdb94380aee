"""What the subcommands are built on: the kubectl-style global flags, the typed `CommonOptions`,
`Context`, the `Command` base and `confirm`, the one rule before every write.
"""
