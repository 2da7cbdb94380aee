"""kubectl kvdtype: get safely through the gpustack-operator upgrade that enforces a Binding's dtype.

The public surface is the command line (``kubectl kvdtype``), one module per subcommand (``check``,
``find_flags``, ``verify``, ``escape``, ``completion``). The underscore modules are layers; each
imports only from its own layer or those below it (tests/test_layers.py holds the map), and no
subcommand imports another:

- ground: ``_status`` (exit codes, and the errors that carry one), ``_codes`` (every finding code,
  its severity and meaning), ``_env`` (the streams), ``_progress``;
- data: ``_report`` collects findings and decides the exit status, ``_render`` prints (``_junit``: JUnit
  XML, ``_sarif``: the SARIF log), ``_flags`` the global flags, ``_engines``
  and ``_argv`` know the engines and how they read their argv, ``_model`` reads the objects'
  shapes, ``_sources`` the kinds and queries, ``_journal`` a rebind's journal;
- sources: ``_cluster`` (live) and ``_manifests`` (offline, ``-f``; ``_positions`` finds lines in its
  files for ``-o sarif``), ``_command`` what a subcommand is given;
- judgement: ``_judgement`` (check's judgement, shared), ``_setting``, ``_rebind`` and ``_restore``
  (what ``escape`` carries out);
- subcommands;
- command line: ``_registry`` names the subcommands by module path and builds the parser,
  ``_complete`` answers shell completion, ``_cli`` runs one subcommand and owns the process's end.
"""

__version__ = "0.1.0"
#: The project's home page (setup.cfg's ``url``; tests/test_packaging.py keeps them equal).
HOMEPAGE = "https://github.com/gpustack/kubectl-kvdtype"
