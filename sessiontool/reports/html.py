"""A transcript as one self-contained HTML page (`history --format html`, and each session page
of `export --html`).

Self-contained: the style is inline, there is no script, font or image to fetch, and a
Content-Security-Policy meta tag forbids loading anything, so the page reads the same offline,
attached to a ticket or opened years later. A transcript can hold any text (a pasted web page,
a tool's raw output, terminal escapes): every piece of it goes through `h`, which escapes markup
and shows control characters as visible symbols, so nothing in it runs or breaks the page.

Pages are built as lists of strings joined once: a 10,000-message session renders in the time
the Markdown view takes (bench/cases_html.py)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

Message = dict[str, Any]
LinkFor = Callable[[str], str | None]  # a session key as a transcript names it → href or None
Usage = tuple[int, int, int, int, float]  # input, output, cache read, cache write, cost (USD)
PriceFor = Callable[[str, str, int, int, int, int, float | None], float]

FOLD_LINES = 30  # a text longer than this (or than FOLD_CHARS) shows its first screenful
FOLD_KEEP = 20
FOLD_CHARS = 3000
SUMMARY_CHARS = 120

# C0/C1 controls, lone surrogates and non-characters: shown as symbols, never emitted raw (a NUL
# or an ESC in a page is at best invisible and at worst read as something else).
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0d\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def _visible(m: re.Match[str]) -> str:
    """A control character as the escape people know from terminals and JSON (`\\e`, `\\x00`),
    set apart by style; every font has these glyphs, unlike U+2400's control pictures."""
    o = ord(m.group())
    if 0xD800 <= o <= 0xDFFF:
        return "\ufffd"
    shown = "\\e" if o == 0x1B else (f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}")
    return f'<span class="c">{shown}</span>'


def ha(text: str) -> str:
    """Text for a double-quoted attribute (no markup: control characters as U+FFFD)."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _UNSAFE.sub("\ufffd", text.replace('"', "&quot;"))


def h(text: str) -> str:
    """Text for an element's content (`ha` for an attribute)."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    if _UNSAFE.search(text):
        text = _UNSAFE.sub(_visible, text)
    return text


def fmt_time(ms: Any) -> str:
    if not isinstance(ms, int | float) or isinstance(ms, bool):
        return ""
    try:
        t = time.gmtime(ms / 1000)
    except (OverflowError, ValueError, OSError):
        return "?"
    return time.strftime("%Y-%m-%d %H:%M:%S", t)


def fmt_count(n: float) -> str:
    return f"{int(n):,}"


def fmt_usd(v: float) -> str:
    return f"${v:.4f}" if v < 100 else f"${v:,.2f}"


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
    if msg.get("role") != "assistant" or not isinstance(u, dict):
        return None
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


def _text_block(text: str) -> str:
    """Text as a pre-wrapped paragraph; past a screenful the rest is folded."""
    if len(text) <= FOLD_CHARS and text.count("\n") < FOLD_LINES:
        return f"<p>{h(text)}</p>"
    lines = text.split("\n")
    head = "\n".join(lines[:FOLD_KEEP])
    if len(head) > FOLD_CHARS:
        head = head[: FOLD_CHARS // 2]
    rest = text[len(head) :]
    more = rest.count("\n") + 1
    label = f"{more:,} more lines" if more > 1 else f"{len(rest):,} more characters"
    return f'<p>{h(head)}</p><details class="more"><summary>{label}</summary><p>{h(rest)}</p></details>'


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


def _links(refs: Iterable[str], link_for: LinkFor | None) -> str:
    if link_for is None:
        return ""
    out = []
    for r in refs:
        href = link_for(r)
        if href is not None:
            out.append(f'<a href="{ha(href)}">{h(r)}</a>')
    return (" → " + " ".join(out)) if out else ""


def _tool_call(b: dict[str, Any], link_for: LinkFor | None) -> str:
    args = b.get("arguments", {})
    name = h(str(b.get("name", "?")))
    line = json.dumps(args, ensure_ascii=False) if isinstance(args, dict | list) else str(args)
    short = _one_line(line, 80)
    return (
        f'<details class="tc"><summary><b>call</b> <code>{name}</code> <code>{h(short)}</code>'
        f"{_links(_session_refs(args), link_for)}</summary><pre>{h(_json_text(args))}</pre></details>"
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


def _result(name: str, text: str, error: bool, refs: list[str], link_for: LinkFor | None) -> str:
    n = text.count("\n") + 1 if text else 0
    size = f"{n:,} lines" if n > 1 else (f"{len(text):,} chars" if text else "empty")
    cls = "tr err" if error else "tr"
    what = "error" if error else "result"
    return (
        f'<details class="{cls}"><summary><b>{what}</b> <code>{h(name)}</code> '
        f"{h(_one_line(text, 80)) if n <= 1 else size}{_links(refs, link_for)}"
        f"</summary><pre>{h(text)}</pre></details>"
    )


def _body(msg: Message, link_for: LinkFor | None) -> str:
    role = msg.get("role")
    content = msg.get("content")
    if role == "toolResult":
        return _result(
            str(msg.get("toolName") or "tool"),
            _blocks_text(content),
            bool(msg.get("isError")),
            _session_refs(msg.get("details")),
            link_for,
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
                str(d.get("toolName", "tool")), text, bool(d.get("isError")), [], link_for
            )
        text = _blocks_text(content) or _json_text(d if d is not None else content)
        return _text_block(text)
    if isinstance(content, str):
        out = [_text_block(content)] if content else []
    else:
        out = []
        for b in content if isinstance(content, list) else ():
            if not isinstance(b, dict):
                continue
            t = b.get("type")
            if t == "text" and isinstance(b.get("text"), str):
                out.append(_text_block(b["text"]))
            elif t == "thinking" and isinstance(b.get("thinking"), str):
                out.append(
                    '<details class="th"><summary><b>thinking</b></summary>'
                    + _text_block(b["thinking"])
                    + "</details>"
                )
            elif t == "toolCall":
                out.append(_tool_call(b, link_for))
            elif t == "image":
                out.append(f'<p class="img">[image {h(str(b.get("mimeType", "")))}]</p>')
        if not out and isinstance(msg.get("text"), str):
            out.append(_text_block(msg["text"]))
    reason = msg.get("stopReason")
    if role == "assistant" and reason in ("error", "aborted"):
        err = msg.get("errorMessage")
        detail = err.strip() if isinstance(err, str) and err.strip() else "(no message)"
        out.append(
            f'<p class="fail">[{"aborted" if reason == "aborted" else "error"}: {h(detail)}]</p>'
        )
    return "".join(out) if out else '<p class="empty">(empty)</p>'


# The Stats line of a sub-agent's announce (flow/announce.py, OpenClaw's format): a Clawdbot-era
# announce is a plain user message, its source named only there.
_ANNOUNCE_STATS = re.compile(r"^Stats: .*?\bsessionKey (\S+)", re.MULTILINE)


def _origin(msg: Message) -> tuple[str | None, str | None]:
    """The session an inter-session message came from, and the tool that brought it."""
    prov = msg.get("provenance")
    if isinstance(prov, dict) and prov.get("kind") == "inter_session":
        src, via = prov.get("sourceSessionKey"), prov.get("sourceTool")
        return (
            src if isinstance(src, str) and src else "another session",
            via if isinstance(via, str) else None,
        )
    if msg.get("role") == "user":
        text = _blocks_text(msg.get("content"))
        if "Stats: " in text:
            m = _ANNOUNCE_STATS.search(text)
            if m:
                return m.group(1), "announce"
    return None, None


def is_reset(msg: Message) -> bool:
    return msg.get("role") == "system" and _blocks_text(msg.get("content")).strip() == "Reset"


_ROLE_CLASS = {"user": "user", "assistant": "asst", "toolResult": "tool", "system": "sys"}
_ROLE_LABEL = {"toolResult": "tool", "custom": "tool (nested)"}


def message_html(i: int, msg: Message, link_for: LinkFor | None, price_for: PriceFor | None) -> str:
    role = str(msg.get("role", "?"))
    ts = fmt_time(msg.get("timestamp"))
    if is_reset(msg):
        return f'<div class="reset" id="m{i}"><span>Reset · {ts}</span></div>'
    cls = _ROLE_CLASS.get(role, "other")
    label = _ROLE_LABEL.get(role, role)
    meta = ""
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
        meta = f"<small>{' · '.join(bits)}</small>"
    src, via = _origin(msg)
    origin = ""
    if src is not None:
        cls += " inter"
        href = link_for(src) if link_for is not None else None
        who = f'<a href="{ha(href)}">{h(src)}</a>' if href else f"<code>{h(src)}</code>"
        origin = f'<p class="from">from {who}{" via " + h(via) if via else ""}</p>'
    return (
        f'<article class="m {cls}" id="m{i}"><h3>{h(label)}<time>{ts}</time>{meta}</h3>'
        f"{origin}{_body(msg, link_for)}</article>"
    )


# -- the page ---------------------------------------------------------------------------------

CSS = """
:root{color-scheme:light dark;--bg:#fbfbfa;--fg:#1d1d1f;--mute:#6b6b73;--line:#e2e2e6;
--card:#fff;--user:#eef4ff;--asst:#fff;--tool:#f6f6f8;--acc:#2d6cdf;--err:#c62828;--bar:#2d6cdf;
--bar2:#8fb3f0;--code:#f3f3f5}
@media (prefers-color-scheme:dark){:root{--bg:#141416;--fg:#e8e8ea;--mute:#9a9aa3;
--line:#2e2e33;--card:#1c1c1f;--user:#1a2436;--asst:#1c1c1f;--tool:#19191c;--acc:#7aa7ff;
--err:#ff6b6b;--bar:#7aa7ff;--bar2:#3b5c99;--code:#26262b}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:16px/1.55 system-ui,-apple-system,
"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
a{color:var(--acc)}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace;
font-size:.86em}
header.top{position:sticky;top:0;z-index:2;background:var(--bg);border-bottom:1px solid var(--line);
padding:.6rem 1rem .5rem}
header.top>*{max-width:58rem;margin-left:auto;margin-right:auto}
main.wide,header.top.wide>*{max-width:80rem}
header.top nav{font-size:.85rem;color:var(--mute)}
header.top nav a{margin-right:.9rem}
h1{font-size:1.15rem;margin:.15rem 0;overflow-wrap:anywhere}
.meta{margin:0;color:var(--mute);font-size:.85rem}
main{max-width:58rem;margin:0 auto;padding:1rem}
.m{background:var(--card);border:1px solid var(--line);border-radius:10px;margin:.7rem 0;
padding:.55rem .8rem;scroll-margin-top:6rem}
.m.user{background:var(--user)}
.m.tool,.m.other{background:var(--tool);padding:.35rem .8rem}
.m.inter{border-left:4px solid var(--acc)}
.m h3{display:flex;flex-wrap:wrap;gap:.2rem .7rem;align-items:baseline;margin:0;
font-size:.9rem;font-weight:650;text-transform:capitalize}
.m h3 time,.m h3 small{font-size:.82rem;font-weight:400;color:var(--mute);text-transform:none}
.m h3 small{margin-left:auto}
.from{font-size:.85rem;color:var(--mute);margin:.15rem 0}
.m p{white-space:pre-wrap;overflow-wrap:anywhere;margin:.3rem 0}
.m p.fail{color:var(--err)}
.m p.empty{color:var(--mute);font-style:italic}
.m p.from{white-space:normal}
.c{color:var(--err);background:var(--code);border-radius:3px;font:.8em ui-monospace,monospace}
details{margin:.3rem 0}
summary{cursor:pointer;color:var(--mute);font-size:.88rem;overflow-wrap:anywhere}
summary code{color:var(--fg)}
summary b{font-weight:600}
.err>summary b{color:var(--err)}
pre{background:var(--code);border-radius:6px;padding:.5rem .7rem;margin:.3rem 0;
white-space:pre-wrap;overflow-wrap:anywhere;max-height:40rem;overflow:auto}
details.more>summary{font-size:.85rem}
.reset{display:flex;align-items:center;gap:.8rem;color:var(--err);font-size:.85rem;margin:1.2rem 0}
.reset:before,.reset:after{content:"";flex:1;border-top:2px dashed var(--err)}
table{border-collapse:collapse;width:100%;font-size:.88rem;background:var(--card)}
th,td{padding:.35rem .55rem;border-bottom:1px solid var(--line);text-align:left;
vertical-align:top}
th{font-weight:600;color:var(--mute);font-size:.8rem;text-transform:uppercase;letter-spacing:.03em}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.key{overflow-wrap:anywhere}
.kind{font-size:.78rem;border:1px solid var(--line);border-radius:4px;padding:0 .3rem}
h2{font-size:1rem;margin:1.6rem 0 .5rem}
svg{display:block;max-width:100%;height:auto}
svg text{fill:var(--mute);font:11px system-ui,sans-serif}
svg .b{fill:var(--bar)}
svg .b2{fill:var(--bar2)}
svg .g{stroke:var(--line)}
.legend{font-size:.8rem;color:var(--mute)}
.sw{display:inline-block;width:.8em;height:.8em;border-radius:2px;vertical-align:-.05em}
.sw.b{background:var(--bar)}.sw.b2{background:var(--bar2)}
"""

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def page(title: str, header: str, body: Iterable[str], *, main_class: str = "") -> str:
    """A whole document; `header` and `body` are already HTML, `title` is text."""
    cls = f' class="{main_class}"' if main_class else ""
    return "".join(
        [
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width,initial-scale=1">'
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
            '<meta name="referrer" content="no-referrer">'
            f"<title>{ha(title)}</title><style>{CSS}</style></head>\n<body>"
            f'<header class="top{" wide" if main_class == "wide" else ""}">{header}</header>\n'
            f"<main{cls}>\n",
            *body,
            "</main></body></html>\n",
        ]
    )


def transcript_page(
    key: str,
    messages: Sequence[Message],
    *,
    facts: Sequence[str] = (),
    nav: str = "",
    related: str = "",
    link_for: LinkFor | None = None,
    price_for: PriceFor | None = None,
) -> str:
    """One session's page. `facts` are short HTML pieces for the header line, `nav` the links
    above the title, `related` HTML shown above the conversation (spawn parent / children)."""
    first = fmt_time(messages[0].get("timestamp")) if messages else ""
    last = fmt_time(messages[-1].get("timestamp")) if messages else ""
    parts = [*facts, f"{len(messages):,} messages"]
    if first:
        parts.append(f"{first} – {last} UTC")
    header = (
        (f"<nav>{nav}</nav>" if nav else "")
        + f"<h1>{h(key)}</h1>"
        + f'<p class="meta">{" · ".join(parts)}</p>'
    )
    body: list[str] = [related] if related else []
    nl = "\n"
    body += [message_html(i, m, link_for, price_for) + nl for i, m in enumerate(messages)]
    if not messages:
        body.append('<p class="meta">No messages.</p>')
    return page(key, header, body)
