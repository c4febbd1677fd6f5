"""Entry point of the `sessiontool` console script. `main` registers only the command it is
asked to run; whoever needs the whole command tree (docs, tests) calls
`sessiontool.cli.commands.register_all()` first."""

from __future__ import annotations

from sessiontool.cli.app import app, main

__all__ = ["app", "main"]

if __name__ == "__main__":  # pragma: no cover
    main()
