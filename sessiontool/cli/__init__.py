"""The command line: `main.py` is the program (the console script and `python -m sessiontool`),
`app.py` the Typer app and its global options, `commands/` the commands that register on it,
`render.py` the one renderer. Nothing is imported here, so importing one of them loads only what
it needs."""
