"""Cells as `top` shows them: ages, counts, sizes, and text with its control characters escaped
(as the CLI's tables show them: one session is one row, and no escape sequence from a key,
label or transcript reaches the terminal)."""

from __future__ import annotations

import json
import re
from typing import Any

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\x1b": "\\e"}


def esc(value: Any) -> str:
    """One line: control characters as `\\n`, `\\e`, `\\x07`."""
    s = value if isinstance(value, str) else ("" if value is None else str(value))
    return _CONTROL.sub(lambda m: _NAMED.get(m.group(), f"\\x{ord(m.group()):02x}"), s)


def esc_body(value: str) -> str:
    """A message body: its lines and tabs kept, every other control character escaped."""
    return "\n".join("\t".join(esc(p) for p in line.split("\t")) for line in value.split("\n"))


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
