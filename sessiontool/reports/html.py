"""A transcript as one HTML page (`history --format html`, and each session page of
`export --html`): roles, times, each turn's model, tokens and cost, tool calls and results folded,
long texts folded after a screenful, a reset as a divider, and where an inter-session message
came from (linked when its session has a page beside this one). Escaping and the page around it:
reports/htmlbase.py.

Pages are built as lists of strings joined once: a 10,000-message session renders in about the
time the Markdown view takes (bench/cases_html.py)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sessiontool.protocol import is_delivery_mirror
from sessiontool.reports.htmlbase import Markup, fill, fmt_time, fmt_usd, h, ha, join, page

Message = dict[str, Any]
LinkFor = Callable[[str], str | None]  # a session key as a transcript names it → href or None
Usage = tuple[int, int, int, int, float]  # input, output, cache read, cache write, cost (USD)
PriceFor = Callable[[str, str, int, int, int, int, float | None], float]

FOLD_LINES = 30  # a text longer than this (or than FOLD_CHARS) shows its first screenful
FOLD_KEEP = 20
FOLD_CHARS = 3000
SUMMARY_CHARS = 120


def _num(v: Any) -> int:
    return int(v) if isinstance(v, int | float) and not isinstance(v, bool) else 0


def recorded_cost(u: dict[str, Any]) -> float | None:
    cost = u.get("cost")
    if isinstance(cost, dict):
        cost = cost.get("total")
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        return float(cost)
    return None


def turn_usage(msg: Message, price_for: PriceFor | None) -> Usage | None:
    """What one assistant turn cost, as `usage` counts it (configured price, else recorded)."""
    u = msg.get("usage")
    if msg.get("role") != "assistant" or not isinstance(u, dict) or is_delivery_mirror(msg):
        return None  # a delivery mirror is no turn: the reply it posted was counted
    i, o = _num(u.get("input")), _num(u.get("output"))
    cr, cw = _num(u.get("cacheRead")), _num(u.get("cacheWrite"))
    rec = recorded_cost(u)
    if price_for is not None:
        cost = price_for(
            str(msg.get("provider") or ""), str(msg.get("model") or ""), i, o, cr, cw, rec
        )
    else:
        cost = rec or 0.0
    return i, o, cr, cw, cost


def model_name(msg: Message) -> str:
    provider, model = msg.get("provider"), msg.get("model")
    model = model if isinstance(model, str) and model else "(unknown)"
    return f"{provider}/{model}" if isinstance(provider, str) and provider else model


# -- message pieces ---------------------------------------------------------------------------


def _text_block(text: str) -> Markup:
    """Text as a pre-wrapped paragraph; past a screenful the rest is folded."""
    if len(text) <= FOLD_CHARS and text.count("\n") < FOLD_LINES:
        return fill(_P, h(text))
    lines = text.split("\n")
    head = "\n".join(lines[:FOLD_KEEP])
    if len(head) > FOLD_CHARS:
        head = head[: FOLD_CHARS // 2]
    rest = text[len(head) :]
    if rest.startswith("\n"):  # the newline between the two parts: no blank first line
        rest = rest[1:]
    more = rest.rstrip("\n").count("\n") + 1  # 80 lines, 20 shown: "60 more lines"
    label = f"{more:,} more lines" if more > 1 else f"{len(rest):,} more characters"
    return fill(
        Markup('<p>{}</p><details class="more"><summary>{}</summary><p>{}</p></details>'),
        h(head),
        label,
        h(rest),
    )


def _markdown_block(text: str) -> Markup:
    """A model's text with its Markdown rendered (reports/markdown.py); past a screenful the rest
    is folded between two blocks. One huge line or block that cannot be cut is folded as plain
    text when it is very long, else shown whole (a code block scrolls)."""
    from sessiontool.reports import markdown

    # markdown.py's HTML is escaped there (its module docstring): marked Markup here, unread.
    if len(text) <= FOLD_CHARS and text.count("\n") < FOLD_LINES:
        return fill(_MD, Markup(markdown.render(text)))
    folded = markdown.fold(text, FOLD_KEEP)
    if folded is None:
        if len(text) > 10 * FOLD_CHARS:
            return _text_block(text)
        return fill(_MD, Markup(markdown.render(text)))
    head, rest, hidden = folded
    label = f"{hidden:,} more line{'s' if hidden > 1 else ''}"
    return fill(
        Markup(
            '<div class="md">{}</div><details class="more"><summary>{}</summary>'
            '<div class="md">{}</div></details>'
        ),
        Markup(head),
        label,
        Markup(rest),
    )


_MD = Markup('<div class="md">{}</div>')
_P = Markup("<p>{}</p>")


def _one_line(text: str, n: int = SUMMARY_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _json_text(v: Any) -> str:
    try:
        return json.dumps(v, ensure_ascii=False, indent=1)
    except (TypeError, ValueError):
        return repr(v)


def _session_refs(v: Any) -> list[str]:
    """Session keys a tool call's arguments or a result's details name (sessions_send,
    sessions_spawn, sessions_history): the pages to link from it."""
    if not isinstance(v, dict):
        return []
    out = []
    for k in ("sessionKey", "childSessionKey", "targetSessionKey", "session"):
        s = v.get(k)
        if isinstance(s, str) and s:
            out.append(s)
    return out


def _links(refs: Iterable[str], link_for: LinkFor | None) -> Markup:
    if link_for is None:
        return _NONE
    out = []
    for r in refs:
        href = link_for(r)
        if href is not None:
            out.append(fill(_LINK, ha(href), h(r)))
    return fill(Markup(" → {}"), join(Markup(" "), out)) if out else _NONE


_LINK = Markup('<a href="{}">{}</a>')


def _tool_call(b: dict[str, Any], link_for: LinkFor | None) -> Markup:
    args = b.get("arguments", {})
    name = h(str(b.get("name", "?")))
    line = json.dumps(args, ensure_ascii=False) if isinstance(args, dict | list) else str(args)
    short = _one_line(line, 80)
    return fill(
        _CALL,
        name,
        h(short),
        _links(_session_refs(args), link_for),
        h(_json_text(args)),
    )


_CALL = Markup(
    '<details class="tc"><summary><b>call</b> <code>{}</code> <code>{}</code>'
    "{}</summary><pre>{}</pre></details>"
)


def _blocks_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    if isinstance(content, list):
        for b in content:
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str):
                parts.append(b["text"])
            elif isinstance(b, dict) and b.get("type") == "image":
                parts.append(f"[image {b.get('mimeType', '')}]")
    return "\n".join(parts)


def _result(name: str, text: str, error: bool, refs: list[str], link_for: LinkFor | None) -> Markup:
    n = text.count("\n") + 1 if text else 0
    size = f"{n:,} lines" if n > 1 else (f"{len(text):,} chars" if text else "empty")
    cls = "tr err" if error else "tr"
    what = "error" if error else "result"
    return fill(
        _RESULT,
        cls,
        what,
        h(name),
        h(_one_line(text, 80)) if n <= 1 else size,
        _links(refs, link_for),
        h(text),
    )


_RESULT = Markup(
    '<details class="{}"><summary><b>{}</b> <code>{}</code> {}{}</summary><pre>{}</pre></details>'
)


def _body(msg: Message, link_for: LinkFor | None) -> Markup:
    role = msg.get("role")
    content = msg.get("content")
    if role == "toolResult":
        return _result(
            str(msg.get("toolName") or "tool"),
            _blocks_text(content),
            bool(msg.get("isError")),
            refs=_session_refs(msg.get("details")),
            link_for=link_for,
        )
    if role == "custom":
        d = msg.get("details")
        if isinstance(d, dict) and ("toolName" in d or "result" in d):
            res = d.get("result")
            text = _blocks_text(res.get("content")) if isinstance(res, dict) else _json_text(res)
            call = _tool_call(
                {"name": d.get("toolName", "?"), "arguments": d.get("input", {})}, link_for
            )
            return call + _result(
                str(d.get("toolName", "tool")),
                text,
                bool(d.get("isError")),
                refs=[],
                link_for=link_for,
            )
        text = _blocks_text(content) or _json_text(d if d is not None else content)
        return _text_block(text)
    # A model writes Markdown; people and tools write text that may only look like it.
    prose = _markdown_block if role == "assistant" else _text_block
    out: list[Markup] = []
    if isinstance(content, str):
        out = [prose(content)] if content else []
    else:
        for b in content if isinstance(content, list) else ():
            if not isinstance(b, dict):
                continue
            t = b.get("type")
            if t == "text" and isinstance(b.get("text"), str):
                out.append(prose(b["text"]))
            elif t == "thinking" and isinstance(b.get("thinking"), str):
                out.append(fill(_THINKING, prose(b["thinking"])))
            elif t == "toolCall":
                out.append(_tool_call(b, link_for))
            elif t == "image":
                out.append(
                    fill(Markup('<p class="img">[image {}]</p>'), h(str(b.get("mimeType", ""))))
                )
        if not out and isinstance(msg.get("text"), str):
            out.append(prose(msg["text"]))
    reason = msg.get("stopReason")
    if role == "assistant" and reason in ("error", "aborted"):
        err = msg.get("errorMessage")
        detail = err.strip() if isinstance(err, str) and err.strip() else "(no message)"
        out.append(
            fill(
                Markup('<p class="fail">[{}: {}]</p>'),
                "aborted" if reason == "aborted" else "error",
                h(detail),
            )
        )
    return join(_NONE, out) if out else _EMPTY


_NONE = Markup()
_EMPTY = Markup('<p class="empty">(empty)</p>')
_THINKING = Markup('<details class="th"><summary><b>thinking</b></summary>{}</details>')


def _origin(msg: Message) -> tuple[str | None, str | None]:
    """The session an inter-session message came from, and the tool that brought it."""
    from sessiontool.sessions.origin import origin

    return origin(msg)


def is_reset(msg: Message) -> bool:
    return msg.get("role") == "system" and _blocks_text(msg.get("content")).strip() == "Reset"


_ROLE_CLASS = {"user": "user", "assistant": "asst", "toolResult": "tool", "system": "sys"}
_ROLE_LABEL = {"toolResult": "tool", "custom": "tool (nested)"}


def message_html(
    i: int, msg: Message, link_for: LinkFor | None, price_for: PriceFor | None, top: float = 0.0
) -> Markup:
    """One message; a turn's meta says its model, tokens and cost, with a bar of its cost
    against the page's costliest turn (`top`)."""
    role = str(msg.get("role", "?"))
    ts = fmt_time(msg.get("timestamp"))
    if is_reset(msg):
        return fill(Markup('<div class="reset" id="m{}"><span>Reset · {}</span></div>'), i, ts)
    cls = _ROLE_CLASS.get(role, "other")
    label = _ROLE_LABEL.get(role, role)
    meta = _NONE
    u = turn_usage(msg, price_for)
    if u is not None:
        ii, o, cr, cw, cost = u
        bits = [h(model_name(msg)), f"{ii:,} in", f"{o:,} out"]
        if cr:
            bits.append(f"{cr:,} cache read")
        if cw:
            bits.append(f"{cw:,} cache write")
        if cost:
            bits.append(fmt_usd(cost))
            if top > 0:
                bits.append(fill(_BAR, max(1, round(cost / top * 120))))
        meta = fill(_SMALL, join(_DOT, bits))
    src, via = _origin(msg)
    origin = _NONE
    if src is not None:
        cls += " inter"
        href = link_for(src) if link_for is not None else None
        who = fill(_LINK, ha(href), h(src)) if href else fill(_CODE, h(src))
        origin = fill(
            Markup('<p class="from">from {}{}</p>'),
            who,
            fill(Markup(" via {}"), h(via)) if via else "",
        )
    return fill(_ARTICLE, cls, i, h(label), ts, meta, origin, _body(msg, link_for))


_SMALL, _DOT, _CODE = Markup("<small>{}</small>"), Markup(" · "), Markup("<code>{}</code>")
# A turn's cost as a bar, 120 px at the page's costliest turn: an inline SVG whose width is an
# attribute (no `style` attribute on any page: tests/test_html_escaping.py holds the set).
_BAR = Markup(
    '<svg class="cbar" width="{0}" height="8" viewBox="0 0 {0} 8" role="img" aria-label="cost">'
    '<rect class="b" width="{0}" height="8" rx="1"></rect></svg>'
)
_ARTICLE = Markup('<article class="m {}" id="m{}"><h3>{}<time>{}</time>{}</h3>{}{}</article>')


def mirror_html(i: int, msg: Message, session_key: str, repeats: bool) -> Markup:
    """A delivery mirror as a small mark under the reply it posted (sessions/mirrors.py); its
    text only when it is not that reply's."""
    from sessiontool.sessions import mirrors

    ts = fmt_time(msg.get("timestamp"))
    note = fill(Markup("↳ {} · <time>{}</time>"), h(mirrors.mark(session_key, msg)), ts)
    if repeats:
        return fill(Markup('<div class="dlv" id="m{}"><p>{} · the reply above</p></div>'), i, note)
    text = _blocks_text(msg.get("content"))
    return fill(
        Markup('<div class="dlv" id="m{}"><p>{}</p>{}</div>'),
        i,
        note,
        _markdown_block(text) if text else "",
    )


# -- the page ---------------------------------------------------------------------------------


def transcript_page(
    key: str,
    messages: Sequence[Message],
    *,
    facts: Sequence[Markup] = (),
    nav: Markup = Markup(),
    related: Markup = Markup(),
    link_for: LinkFor | None = None,
    price_for: PriceFor | None = None,
) -> Markup:
    """One session's page. `facts` are short HTML pieces for the header line, `nav` the links
    above the title, `related` HTML shown above the conversation (spawn parent / children)."""
    first = fmt_time(messages[0].get("timestamp")) if messages else ""
    last = fmt_time(messages[-1].get("timestamp")) if messages else ""
    n = len(messages)
    parts: list[Markup | str] = [*facts, f"{n:,} message{'' if n == 1 else 's'}"]
    if first:
        parts.append(f"{first} – {last} UTC")
    header = fill(
        Markup('{}<h1>{}</h1><p class="meta">{}</p>'),
        fill(Markup("<nav>{}</nav>"), nav) if nav else "",
        h(key),
        join(Markup(" · "), parts),
    )
    body: list[Markup] = [related] if related else []
    nl = Markup("\n")  # one for every message
    costs = [u[4] for m in messages if (u := turn_usage(m, price_for)) is not None]
    top = max(costs, default=0.0)
    for i, m in enumerate(messages):
        if is_delivery_mirror(m):
            from sessiontool.sessions.mirrors import repeats_reply

            body += (mirror_html(i, m, key, repeats_reply(messages, i)), nl)
        else:
            body += (message_html(i, m, link_for, price_for=price_for, top=top), nl)
    if not messages:
        body.append(Markup('<p class="meta">No messages.</p>'))
    return page(key, header, body)
