"""Entry point of the `sessiontool` console script."""

from __future__ import annotations

from .app import app, main
from .commands import register_all

register_all()

__all__ = ["app", "main"]

if __name__ == "__main__":  # pragma: no cover
    main()
