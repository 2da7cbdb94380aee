"""What is written to a cluster: the Setting switch, the rebind plan and its journal and lease,
`find-flags --fix` and `escape restore`. Every write has a precondition and a journal or a
message that says how far it got.
"""
