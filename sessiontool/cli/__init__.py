"""Entry point of the `sessiontool` console script."""

from __future__ import annotations

from sessiontool.cli.app import app, main
from sessiontool.cli.commands import register_all

register_all()

__all__ = ["app", "main"]

if __name__ == "__main__":  # pragma: no cover
    main()
