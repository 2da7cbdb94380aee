"""kubectl kvdtype: get safely through the gpustack-operator upgrade that enforces a Binding's dtype.

The public surface is the command line (``kubectl kvdtype``), one module per subcommand here:
``check``, ``find_flags``, ``verify``, ``preflight``, ``escape``, ``guard``, ``completion``. Everything else is
private, in one underscore subpackage per layer (lowest first: ``_kits``, ``_engines``, ``_output``,
``_sources``, ``_commands``, ``_judging``, ``_changes``, then the subcommands, then ``_cli``); each
imports only from its own layer or those below it, and no subcommand imports another. The order is
stated once, as the import-linter contract in pyproject.toml; docs/development.md says what each
module holds.
"""

__version__ = "0.1.0"
#: The project's home page (setup.cfg's ``url``; tests/test_packaging.py keeps them equal).
HOMEPAGE = "https://github.com/gpustack/kubectl-kvdtype"
