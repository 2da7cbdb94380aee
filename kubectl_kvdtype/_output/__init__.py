"""The output formats: `FORMATS` (in `render`), the one table of `-o` formats, each row saying how a
run treats its format, and one module per writer (tables, JSON and YAML, JUnit, SARIF, patches).
Reports in, text out; nothing here talks to a cluster.
"""
