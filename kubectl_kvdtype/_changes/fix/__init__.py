"""``find-flags --fix``: remove the flags the upgrade will refuse, object by object, safely.

- ``plan``: one JSON patch per object to change (a role's ``extraArgs``, a Pod template's
  ``command``/``args``, an injected Pod's top owner), or why it is a manual step;
- ``apply``: the report, and with ``--apply`` the backup, the journal and the patches, each
  applied only to the version read;
- ``restore``: ``escape restore`` of a fix's backup directory, each patched list put back only
  while the object is as the fix left it;
- ``options``: the flags, typed and checked, all a find-flags run without ``--fix`` imports of it.

``apply`` and ``restore`` build on ``plan`` and not on each other (an import-linter contract in
pyproject.toml holds it).
"""
