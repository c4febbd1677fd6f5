"""Foreign text on a terminal line, one rule for every place that quotes it: the CLI's output
(cli/render.py) and `top` (tui/) both show keys, labels, messages and replies through these, so
what one escapes or cuts the other does too (the base layer: both may import it).

Escaping. Text that comes from outside (a key, a label, a transcript, a gateway's answer) may
hold characters that drive the terminal or make a line read as another; each is shown as an
escape: C0 and C1 controls (U+009B is CSI, ESC's one-character twin), DEL, the line and
paragraph separators, and the bidi controls that reorder what follows them ("Trojan Source":
the embeddings and overrides U+202A-U+202E, the isolates U+2066-U+2069, the marks U+200E,
U+200F and U+061C). One set of characters, one spelling of each (`\\e`, `\\n`, `\\x9b`,
`\\u202e`), three uses: a field (`esc`: a backslash doubled too, so no key prints as another), a
body (`esc_text`: its lines and tabs kept), a message line (`one_line`: errors, hints and
warnings).

Cutting. A value too wide for its column is cut with "…", never folded over lines nor cut
without a mark: a key in the middle (`middle_ellipsis`: its agent and kind lead, its id or peer
ends it), a text at its end (`end_ellipsis`). Cut only on a terminal: TSV and JSON have every
value whole.

Folding. A long message on a terminal shows its first screenful and says what is left out
(`fold`: "12,345 more lines"), as the HTML page folds it (reports/html.py, the same numbers):
`top`'s followed transcript draws a 10 MB message in a few kilobytes.

A session's LABEL cell, in `list`'s table and in `top`, is `label_cell`'s: its label, else the
displayName OpenClaw gives a group or a titled conversation (OpenClaw's own UI labels a session
so); TSV's and JSON's `label` is the label alone, the JSON has `displayName` beside it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

FOLD_LINES = 30  # a text longer than this (or than FOLD_CHARS) shows its first screenful
FOLD_KEEP = 20
FOLD_CHARS = 3000

UNSAFE = "\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_CONTROL = re.compile(f"[\\\\{UNSAFE}]")
_CONTROL_IN_TEXT = re.compile(f"(?![\t\n])[{UNSAFE}]")
_IN_LINE = re.compile(f"[{UNSAFE}]")
_NAMED = {"\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\x1b": "\\e"}


def _escape_char(m: re.Match[str]) -> str:
    c = m.group()
    named = _NAMED.get(c)
    if named is not None:
        return named
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def esc(v: Any) -> str:
    """One field of text output (a key, a label, a cell): control characters shown escaped
    (`\\n`, `\\t`, `\\e`, `\\x07`, `\\u202e`) and a backslash doubled, so one row is one line,
    one key can never print as another, and no terminal escape reaches the terminal."""
    if v is None:
        return ""
    return _CONTROL.sub(_escape_char, v if isinstance(v, str) else str(v))


def esc_text(text: str) -> str:
    """A message body: its lines and tabs stay, every other control character (ESC above all:
    a transcript must not drive the terminal) is shown escaped."""
    return _CONTROL_IN_TEXT.sub(_escape_char, text)


def one_line(text: str) -> str:
    """Messages quote what the user typed, a file held or a gateway said; a newline, a control
    or a bidi override in there must not break the one-line error format, nor reach the
    terminal: it is shown escaped (a backslash stays one: messages name paths)."""
    return _IN_LINE.sub(_escape_char, text)


def middle_ellipsis(text: str, width: int) -> str:
    """`text` in `width` characters, its start and end kept around a "…" (a key's agent and
    kind lead, its id or peer ends it)."""
    if len(text) <= width:
        return text
    if width < 2:
        return "…"[:width]
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head) :]


def end_ellipsis(text: str, width: int) -> str:
    """`text` in `width` characters, cut at its end with a "…" (a reply, an error)."""
    if len(text) <= width:
        return text
    return text[: max(0, width - 1)] + "…" if width > 0 else ""


def label_cell(row: Mapping[str, Any]) -> str:
    """The LABEL cell of a session row (`list`'s table, `top`'s sessions pane), unescaped."""
    for name in ("label", "displayName"):
        v = row.get(name)
        if isinstance(v, str) and v:
            return v
    return ""


def fold(text: str) -> tuple[str, str] | None:
    """A long text's first screenful and what is left out in words ("12,345 more lines",
    "9,998,500 more characters"), or None when it is short enough to show whole. The head is
    found without splitting the text: a 10 MB message costs one pass to count its lines."""
    if len(text) <= FOLD_CHARS and text.count("\n") < FOLD_LINES:
        return None
    pos = kept = 0
    while kept < FOLD_KEEP:
        nl = text.find("\n", pos, FOLD_CHARS + 1)
        if nl == -1:
            break
        pos, kept = nl + 1, kept + 1
    if kept == FOLD_KEEP:  # FOLD_KEEP whole lines within FOLD_CHARS
        head, start = text[: pos - 1], pos
    else:  # a long line: its first half screenful
        head = text[: FOLD_CHARS // 2]
        start = len(head) + (1 if text.startswith("\n", len(head)) else 0)
    end = len(text)
    while end > start and text[end - 1] == "\n":
        end -= 1
    more = text.count("\n", start, end) + 1  # 80 lines, 20 shown: "60 more lines"
    if more > 1:
        return head, f"{more:,} more lines"
    return head, f"{len(text) - start:,} more characters"
