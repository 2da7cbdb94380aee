"""kubectl kvdtype: get safely through the gpustack-operator upgrade that enforces a Binding's dtype.

The public surface is the command line (``kubectl kvdtype``); the underscore modules are layers
behind it: ``_cli`` parses, ``_sources`` lists objects (live through ``_cluster``, offline through
``_manifests``), ``_engines`` knows the engines, ``_report`` collects findings, ``_render`` prints,
``_status`` owns exit codes.
"""

__version__ = "0.1.0"
