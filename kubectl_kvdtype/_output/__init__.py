"""The output formats: `FORMATS`, the one table of `-o` formats, and their writers (tables, JSON,
YAML, JUnit, SARIF). Reports in, text out; nothing here talks to a cluster.
"""
