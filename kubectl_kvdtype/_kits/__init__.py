"""What every layer uses: exit codes and the errors that carry one, finding codes, reports, the
streams, the progress line, safe display of untrusted text, secrets, helper threads. It imports no
other layer (the contract in pyproject.toml; the modules: docs/development.md, "Layout").
"""
