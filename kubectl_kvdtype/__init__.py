"""kubectl kvdtype: get safely through the gpustack-operator upgrade that enforces a Binding's dtype.

The public surface is the command line (``kubectl kvdtype``), one module per subcommand (``check``,
``find_flags``, ``verify``, ``escape``, ``completion``). The underscore modules are layers behind
it: ``_cli`` and ``_flags`` parse, ``_sources`` lists objects (live through ``_cluster``, offline
through ``_manifests``), ``_model`` reads their shapes, ``_engines`` knows the engines, ``_setting``,
``_rebind`` and ``_journal`` carry out ``escape``, ``_report`` collects findings, ``_render``
prints, ``_status`` owns exit codes, ``_env`` the streams.
"""

__version__ = "0.1.0"
