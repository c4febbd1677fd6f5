"""A `history --format` a newcomer might add (tests/test_tables.py): one role a line. Its
renderers are the whole of it; run as a program, it adds its one row to
`cli/historyformats.py`'s table and runs the CLI (`python -m tests.fakes.roles_format ARGS`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sessiontool.context import Context
    from sessiontool.sessions.history import History


def message(key: str, m: dict[str, Any]) -> str:
    return f"{str(m.get('role', '?')).upper()}\n"


def whole(ctx: Context, h: History) -> str:
    return "".join(message(h.session_key, m) for m in h.messages)


if __name__ == "__main__":
    from sessiontool.cli import historyformats
    from sessiontool.cli.main import main

    historyformats.FORMATS["roles"] = historyformats.HistoryFormat(whole, message)
    main()
