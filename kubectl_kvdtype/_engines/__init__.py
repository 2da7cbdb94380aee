"""What is known about the engines (vLLM, SGLang): their records and spellings by version, their
parsers rebuilt from the recorded option tables in data/, and the one verdict on what an engine
does with an argv. Above _kits only; its modules are ordered by their own import-linter contract
(pyproject.toml), the one statement of that order.
"""
