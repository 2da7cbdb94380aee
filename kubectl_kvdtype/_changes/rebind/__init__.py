"""``escape rebind``: move a Binding's workloads to a new Binding with a corrected dtype.

The largest and most dangerous part of ``escape``, one module per job, each importing only those
after it here (an import-linter contract in pyproject.toml holds the order):

- ``run``: ``rebind``, the one entry: plan, or back up, journal and execute, or resume;
- ``resume``: carrying on an unfinished rebind from its journal;
- ``execute``: the access check, the last look, and each step run by its action's runner;
  ``checks``: a journal checked before any step runs; ``report``: the plan's report;
- ``plan``: ``make_plan``, every write decided before the first;
- ``steps``: the typed parts (``RebindOptions``, ``Names``, ``Action``, ``Step``, ``Plan``) and their
  journal JSON.

The command line stays in ``escape``; the Setting's reads and writes come from ``_changes.setting``,
the backup directory and the journal file from ``_changes.journal``, the lease from ``_changes.lease``.
"""
