"""Interfaces: the `pxp` command line, one module per command group (typer).

Owns: argument parsing, one-line errors, printing. May import every layer below
(analysis, running, agents, data, tasks, llm, storage, protocols); only the CLI and the
app import typer. The entry point is pxp.cli.main:main.
"""
