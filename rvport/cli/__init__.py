"""The command line: the Typer app, one module per verb, and how results are shown."""
