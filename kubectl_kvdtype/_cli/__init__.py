"""The command line: the lazy subcommand registry and parser, shell completion, fleet runs over
several contexts, and `main`, the one run and the process's end (exit codes, signals).
"""
