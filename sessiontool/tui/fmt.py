"""Cells as `top` shows them: ages, counts, sizes, and foreign text through the CLI's one rule
(sessiontool/termtext.py): escaped as `list` and `history` escape it (C0 and C1 controls, DEL,
the line separators and the bidi controls), a key cut in the middle and a text at its end with
"…", a long message folded with "N more lines" as the HTML page folds it. One session is one
row, and no escape sequence nor bidi override from a key, label, transcript or reply reaches
the terminal."""

from __future__ import annotations

import json
from typing import Any

from sessiontool.termtext import end_ellipsis, esc, esc_text, fold, middle_ellipsis, one_line

__all__ = ["esc", "esc_text", "one_line", "body", "key_cell", "text_cell"]

MORE_HINT = "`sessiontool history` shows the whole message"


def key_cell(key: Any, width: int) -> str:
    """A session key in a column `width` wide: escaped, then cut in the middle with "…" (as
    `list` cuts a key that does not fit)."""
    return middle_ellipsis(esc(key), width)


def text_cell(value: Any, width: int) -> str:
    """A label, reply or error in a column `width` wide: escaped (a newline as `\\n`: one
    line), then cut at its end with "…"."""
    return end_ellipsis(esc(value), width)


def body(text: str) -> str:
    """A message body to draw: its first screenful when it is long, with how much is left out
    ("… 12,345 more lines"), its lines and tabs kept and every other control escaped. Bounded
    whatever the message: what Rich wraps on the screen's thread is a few kilobytes."""
    folded = fold(text)
    if folded is None:
        return esc_text(text)
    head, more = folded
    return f"{esc_text(head)}\n… {more} ({MORE_HINT})"


def span(seconds: float) -> str:
    """Seconds for the first minute, then minutes: a running run's clock redraws its pane once a
    minute, not once a second, after its first minute."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def ago(ms: Any, now_ms: int) -> str:
    if not isinstance(ms, int | float) or isinstance(ms, bool):
        return "-"
    return span((now_ms - ms) / 1000) + " ago" if now_ms >= ms else "now"


def count(n: Any) -> str:
    if not isinstance(n, int | float) or isinstance(n, bool):
        return "-"
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= size:
            return f"{n / size:.1f}{suffix}"
    return str(int(n))


def size(n: int | None) -> str:
    if n is None:
        return "-"
    mib = n / (1024 * 1024)
    return f"{mib:.0f}M" if mib >= 10 else f"{mib:.1f}M"


def money(amount: float | None, currency: str = "USD") -> str:
    if amount is None:
        return "-"
    return f"${amount:.2f}" if currency == "USD" else f"{amount:.2f} {currency}"


def message_text(msg: dict[str, Any]) -> str:
    """A message's readable text: text blocks, tool calls named, a failed run's error."""
    content = msg.get("content")
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for b in content if isinstance(content, list) else []:
        if not isinstance(b, dict):
            continue
        if b.get("type") == "text" and isinstance(b.get("text"), str):
            parts.append(b["text"])
        elif b.get("type") == "toolCall":
            args = json.dumps(b.get("arguments", {}), ensure_ascii=False)
            parts.append(f"→ {b.get('name', '?')}({args[:200]})")
        elif b.get("type") == "image":
            parts.append(f"[image {b.get('mimeType', '')}]")
    if msg.get("role") == "assistant" and msg.get("stopReason") in ("error", "aborted"):
        parts.append(f"[{msg['stopReason']}: {msg.get('errorMessage') or '(no message)'}]")
    return "\n".join(parts)
