"""Judgement the subcommands share: check's judgement of every Binding, the flags roles and Pods
pass themselves, and the dry run of the upgrade's argv per role. Reads, never writes.
"""
