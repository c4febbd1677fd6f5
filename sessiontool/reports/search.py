"""`search`: every session's messages by their words, through sessiontool's own index.

The query language is SQLite FTS5's (phrases, `prefix*`, AND/OR/NOT, parentheses), with one
kindness: a bare word FTS5 would reject (`fixture-exec-ok`, `user@host`) is searched as the
phrase it spells. Queries in unsegmented scripts (CJK, Thai, ...) go to a trigram table; where
that cannot answer (a term under three characters, or no FTS5 at all) the indexed text is scanned
with the same query semantics."""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, NamedTuple

from sessiontool import diag
from sessiontool.context import Context
from sessiontool.errors import UsageError
from sessiontool.index import catalog
from sessiontool.index import sync as si
from sessiontool.sessions.reading import read_scope

if TYPE_CHECKING:  # for types only
    from typing import TypedDict

    class SearchResult(TypedDict):
        """What `search` returns; `--json` writes it as is (hits best first)."""

        query: str
        engine: str
        count: int
        hits: list[dict[str, Any]]


DEFAULT_LIMIT = 20
MAX_LIMIT = 1000
ROLES = {"user": ("user",), "assistant": ("assistant",), "tool": ("toolResult", "toolCall")}
DEFAULT_ROLES = ("user", "assistant")
_BARE = re.compile(r"^\w+\*?$")

# -- the query -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Term:
    words: tuple[str, ...]  # one for a word, several for a phrase
    prefix: bool
    raw: str  # the text of the term as the user wrote it, without quotes

    @property
    def unsegmented(self) -> bool:
        return si.has_unsegmented(self.raw)

    def pattern(self) -> re.Pattern[str]:
        if self.unsegmented or not re.search(r"\w", self.raw):  # CJK, or symbols: substring
            return re.compile(re.escape(self.raw), re.IGNORECASE)
        parts = [re.escape(w) for w in self.words]
        body = r"\W+".join(parts) + (r"\w*" if self.prefix else "")
        return re.compile(rf"(?<!\w){body}(?!\w)", re.IGNORECASE)


Node = Any  # ("term", Term) | ("and"|"or", [Node]) | ("not", Node, Node)


def _bad(message: str) -> UsageError:
    return UsageError(
        f"invalid search query: {message}",
        hint='FTS5 syntax: words, "exact phrase", prefix*, AND, OR, NOT, ( )',
    )


def _lex(q: str) -> Iterator[tuple[str, str]]:
    i, n = 0, len(q)
    while i < n:
        ch = q[i]
        if ch.isspace():
            i += 1
            continue
        if ch == '"':
            j = i + 1
            while True:
                k = q.find('"', j)
                if k < 0:
                    raise _bad("a quote is not closed")
                if k + 1 < n and q[k + 1] == '"':
                    j = k + 2
                    continue
                break
            end = k + 1
            if end < n and q[end] == "*":
                end += 1
            yield "phrase", q[i:end]
            i = end
            continue
        if ch in "()":
            yield ch, ch
            i += 1
            continue
        j = i
        while j < n and not q[j].isspace() and q[j] not in '()"':
            j += 1
        tok = q[i:j]
        i = j
        yield ("op" if tok in ("AND", "OR", "NOT") else "word"), tok


def _term(kind: str, text: str) -> Term:
    prefix = text.endswith("*")
    body = text[:-1] if prefix else text
    if kind == "phrase":
        body = body[1:-1].replace('""', '"')
    words = tuple(re.findall(r"\w+", body)) or (body,)
    return Term(words, prefix, body)


class _Parser:
    """FTS5's grammar, for the scan: NOT binds tightest, then AND (or juxtaposition), then OR."""

    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.toks = tokens
        self.i = 0

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> tuple[str, str]:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def parse(self) -> Node:
        if not self.toks:
            raise _bad("it is empty")
        node = self.or_()
        if self.peek() is not None:
            raise _bad(f"unexpected {self.peek()[1]!r}")  # type: ignore[index]
        return node

    def or_(self) -> Node:
        items = [self.and_()]
        while self.peek() == ("op", "OR"):
            self.take()
            items.append(self.and_())
        return items[0] if len(items) == 1 else ("or", items)

    def and_(self) -> Node:
        items = [self.not_()]
        while True:
            tok = self.peek()
            if tok == ("op", "AND"):
                self.take()
                items.append(self.not_())
            elif tok is not None and tok[0] in ("word", "phrase", "("):
                items.append(self.not_())
            else:
                break
        return items[0] if len(items) == 1 else ("and", items)

    def not_(self) -> Node:
        node = self.primary()
        while self.peek() == ("op", "NOT"):
            self.take()
            node = ("not", node, self.primary())
        return node

    def primary(self) -> Node:
        tok = self.peek()
        if tok is None:
            raise _bad("it ends where a word was expected")
        kind, text = self.take()
        if kind == "(":
            node = self.or_()
            if self.peek() != (")", ")"):
                raise _bad("a parenthesis is not closed")
            self.take()
            return node
        if kind in ("word", "phrase"):
            return ("term", _term(kind, text))
        raise _bad(f"unexpected {text!r}")


@dataclass
class Query:
    text: str  # as typed
    fts: str  # as sent to FTS5
    tree: Node
    terms: list[Term]  # every term not under a NOT's right side: what a snippet highlights
    # A term with no letter or digit (`✓`, `—`): FTS5's tokenizer keeps none of it, so such a
    # query is answered by a scan of the indexed text.
    symbols: bool = False

    @property
    def unsegmented(self) -> bool:
        return any(t.unsegmented for t in self.terms)

    @property
    def trigram_ok(self) -> bool:
        """The trigram tokenizer matches nothing for a term under three characters."""
        return all(len(t.raw) >= 3 for t in self.terms if t.unsegmented)


def _positive_terms(node: Node, out: list[Term]) -> None:
    if node[0] == "term":
        out.append(node[1])
    elif node[0] in ("and", "or"):
        for n in node[1]:
            _positive_terms(n, out)
    else:
        _positive_terms(node[1], out)


def parse_query(text: str) -> Query:
    if not text.strip():
        raise _bad("it is empty")
    if any(ord(c) < 0x20 and c not in "\t\n\r" for c in text):
        raise _bad("it contains control characters")
    if any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        # A byte that is not UTF-8 (kept by the shell as a lone surrogate): no transcript
        # text, always UTF-8, can hold it.
        raise _bad("it is not valid UTF-8")
    tokens = list(_lex(text))
    tree = _Parser(tokens).parse()
    parts: list[str] = []
    for kind, tok in tokens:
        if kind == "word" and not _BARE.match(tok):
            prefix = tok.endswith("*") and len(tok) > 1
            body = tok[:-1] if prefix else tok
            tok = '"' + body.replace('"', '""') + '"' + ("*" if prefix else "")
        parts.append(tok)
    terms: list[Term] = []
    _positive_terms(tree, terms)
    symbols = any(
        kind in ("word", "phrase") and not re.search(r"\w", _term(kind, tok).raw)
        for kind, tok in tokens
    )
    return Query(text=text, fts=" ".join(parts), tree=tree, terms=terms, symbols=symbols)


def _matches(node: Node, text: str) -> bool:
    kind = node[0]
    if kind == "term":
        return node[1].pattern().search(text) is not None
    if kind == "and":
        return all(_matches(n, text) for n in node[1])
    if kind == "or":
        return any(_matches(n, text) for n in node[1])
    return _matches(node[1], text) and not _matches(node[2], text)


# -- snippets --------------------------------------------------------------------------------


def split_marked(marked: str) -> tuple[str, list[list[int]]]:
    """A snippet with HIT markers → (plain one-line text, [[start, end], ...] of the hits)."""
    marked = " ".join(marked.split())
    out: list[str] = []
    spans: list[list[int]] = []
    pos = 0
    start = -1
    for ch in marked:
        if ch == si.HIT[0]:
            start = pos
        elif ch == si.HIT[1]:
            if start >= 0 and pos > start:
                spans.append([start, pos])
            start = -1
        else:
            out.append(ch)
            pos += 1
    return "".join(out), spans


def scan_snippet(text: str, terms: list[Term], width: int = 160) -> str:
    """The marked snippet of a scanned hit: a window around the first match."""
    spans: list[tuple[int, int]] = []
    for t in terms:
        spans += [(m.start(), m.end()) for m in t.pattern().finditer(text) if m.end() > m.start()]
    spans.sort()
    first = spans[0][0] if spans else 0
    lo = max(0, first - width // 3)
    hi = min(len(text), lo + width)
    out: list[str] = ["…"] if lo > 0 else []
    pos = lo
    for s, e in spans:
        if s < pos or e > hi:
            continue
        out += [text[pos:s], si.HIT[0], text[s:e], si.HIT[1]]
        pos = e
    out.append(text[pos:hi])
    if hi < len(text):
        out.append("…")
    return "".join(out)


# -- searching -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Filters:
    """Which indexed messages a search reads: by role and time (epoch ms, None: open), how
    many hits at most, and whether `temp.scope` limits the files (`catalog.Indexed.scoped`)."""

    roles: tuple[str, ...]
    since_ms: int | None
    until_ms: int | None
    limit: int
    scoped: bool


class Hit(NamedTuple):
    """One hit: its message (file, time, role, the byte offset of its line), its snippet with
    HIT markers, its bm25 score (None from a scan) and its line's entry id, once read."""

    file_id: int
    ts: int
    role: str
    marked: str
    score: float | None
    off: int
    message_id: str | None = None


def _scope(ctx: Context, session: str | None, label: str | None) -> list[catalog.SessionRef] | None:
    """The one session asked for (None: every session the requester may see)."""
    if session is None and label is None:
        return None
    from sessiontool.flow import policy
    from sessiontool.sessions.resolve import resolve

    r = resolve(ctx, session, label=label)
    policy.check_access(ctx, r.key, r.entry, "history")
    return [ref for ref in catalog.live_sessions(ctx, [r.agent_id]) if ref.key == r.key]


def _roles(role: str | None) -> tuple[str, ...]:
    if role is None:
        return DEFAULT_ROLES
    if role not in ROLES:
        raise UsageError(f"unknown role {role!r} (valid roles: user, assistant, tool)")
    return ROLES[role]


def _fts_error(exc: sqlite3.OperationalError) -> UsageError | None:
    text = str(exc)
    if text.startswith("fts5:") or "syntax error" in text or "unknown special query" in text:
        return _bad(text.removeprefix("fts5: "))
    return None


def _query(idx: si.Index, texts: _Texts, q: Query, f: Filters) -> tuple[str, list[Hit]]:
    """(engine, hits): FTS5 where the query allows it, a full scan otherwise."""
    if not idx.fts:
        diag.warn("this SQLite has no FTS5: searching by a full scan (slower)")
        return "scan", _scan(idx, texts, q, f)
    if q.symbols or (q.unsegmented and not (idx.trigram and q.trigram_ok)):
        return "scan", _scan(idx, texts, q, f)
    table = "fts_cjk" if q.unsegmented else "fts"
    try:
        return table, _match(idx, texts, table, q=q, f=f)
    except sqlite3.OperationalError as exc:
        bad = _fts_error(exc)
        if bad is not None:
            raise bad from None
        raise


def search(
    ctx: Context,
    query: str,
    *,
    session: str | None = None,
    label: str | None = None,
    all_agents: bool = False,
    role: str | None = None,
    since_ms: int | None = None,
    until_ms: int | None = None,
    limit: int = DEFAULT_LIMIT,
    include_archived: bool = False,
    progress: si.Progress | None = None,
) -> SearchResult:
    if limit < 1:
        raise UsageError("--limit must be at least 1")
    limit = min(limit, MAX_LIMIT)
    since_ms, until_ms = si.clamp_ms(since_ms), si.clamp_ms(until_ms)
    q = parse_query(query)
    roles = _roles(role)

    def run(idx: si.Index) -> tuple[str, list[Hit], dict[int, catalog.SessionRef]]:
        one = _scope(ctx, session, label)
        agents = catalog.agent_ids(ctx, all_agents) if one is None else []
        want = catalog.Wanted(agents, include_archived, True, one)
        found = catalog.indexed(ctx, idx, want, progress)
        si.left_out(idx, one is not None)
        within = Filters(
            roles=roles, since_ms=since_ms, until_ms=until_ms, limit=limit, scoped=found.scoped
        )
        engine, rows, stale = _answer(idx, found.path, q, within)
        if stale:  # changed in place, unseen by a warm catch-up: indexed again, asked again
            idx.sync(stale, text=True, others=False)
            si.left_out(idx, one is not None)
            engine, rows, _ = _answer(idx, found.path, q, within, check=False)
        refs = {h.file_id: found.ref(h.file_id) for h in rows}
        kept = [h for h in rows if refs[h.file_id] is not None]
        return engine, kept, {i: r for i, r in refs.items() if r is not None}

    with read_scope():
        engine, rows, by_id = si.using_index(ctx.paths.tool_dir, run)
    hits = []
    for h in rows:
        ref = by_id[h.file_id]
        snippet, spans = split_marked(h.marked)
        hit: dict[str, Any] = {
            "key": ref.display_key(ctx),
            "sessionId": ref.session_id,
            "agentId": ref.agent_id,
            "timestamp": h.ts,
            "role": h.role,
            "snippet": snippet,
            "highlights": spans,
        }
        if h.message_id is not None:  # sessions_history's messageId: the window around it
            hit["messageId"] = h.message_id
        if ref.label:
            hit["label"] = ref.label
        if ref.archived:
            hit["archived"] = True
        hit["transcriptPath"] = str(ref.path)
        if h.score is not None:
            hit["score"] = round(-float(h.score), 4)
        hits.append(hit)
    result: SearchResult = {"query": query, "engine": engine, "count": len(hits), "hits": hits}
    return result


def _filters(f: Filters) -> tuple[str, list[Any]]:
    sql = f" AND m.role IN ({','.join('?' * len(f.roles))})"
    args: list[Any] = list(f.roles)
    if f.since_ms is not None:
        sql += " AND m.ts >= ?"
        args.append(f.since_ms)
    if f.until_ms is not None:
        sql += " AND m.ts < ?"
        args.append(f.until_ms)
    if f.scoped:
        sql += " AND m.file_id IN (SELECT id FROM temp.scope)"
    return sql, args


def _answer(
    idx: si.Index,
    path_of: Callable[[int], Path | None],
    q: Query,
    within: Filters,
    *,
    check: bool = True,
) -> tuple[str, list[Hit], list[Path]]:
    """(engine, hits with their messageId, the hits' transcripts that changed since they were
    indexed). Those hits are left out: their lines may no longer hold the words (issue 42).
    Without `check` (asked again right after catching those up), a file still being written
    is read as is."""
    texts = _Texts(idx if check else None, path_of)
    try:
        engine, rows = _query(idx, texts, q, within)
        rows = [
            h._replace(message_id=texts.line_id(h.file_id, h.off))
            for h in rows
            if h.file_id not in texts.stale
        ]
    finally:
        texts.close()
    return engine, rows, list(texts.stale.values())


class _Texts:
    """A hit's text, read back from its transcript line (open files cached for one query).
    Each file opened is checked against what the index saw of it (fstat: identity, size,
    mtime, ctime): one changed since (`stale`) gives no text. A warm search stats only the
    hot transcripts (index/warm.py): an idle one edited in place is caught here."""

    def __init__(self, idx: si.Index | None, path_of: Callable[[int], Path | None]) -> None:
        self.idx = idx
        self.path_of = path_of
        self.files: dict[int, BinaryIO | None] = {}
        self.stale: dict[int, Path] = {}

    def get(self, file_id: int, off: int, part: int, indexed: str | None) -> str | None:
        if indexed is not None:
            return indexed
        fh = self._open(file_id)
        return None if fh is None else si.row_text(fh, off, part)

    def _open(self, file_id: int) -> BinaryIO | None:
        if file_id not in self.files:
            self.files[file_id] = self._first_open(file_id)
        return self.files[file_id]

    def _first_open(self, file_id: int) -> BinaryIO | None:
        path = self.path_of(file_id)
        if path is None:
            return None
        try:
            fh = open(path, "rb")  # noqa: SIM115 - closed by close()
        except OSError:
            return None
        if self.idx is not None and not self.idx.same_file(file_id, os.fstat(fh.fileno())):
            fh.close()
            self.stale[file_id] = path
            return None
        return fh

    def line_id(self, file_id: int, off: int) -> str | None:
        """The entry id of the transcript line at byte `off` (a hit's messageId)."""
        import json

        fh = self._open(file_id)
        if fh is None:
            return None
        try:
            fh.seek(off)
            obj = json.loads(fh.readline())
        except (OSError, ValueError):
            return None
        ident = obj.get("id") if isinstance(obj, dict) else None
        return ident if isinstance(ident, str) else None

    def close(self) -> None:
        for fh in self.files.values():
            if fh is not None:
                fh.close()


def _match(idx: si.Index, texts: _Texts, table: str, q: Query, f: Filters) -> list[Hit]:
    where, args = _filters(f)
    sql = (
        f"SELECT m.file_id, m.ts, m.role, m.off, m.part, m.text, bm25({table}) AS r "
        f"FROM {table} JOIN msgs m ON m.id = {table}.rowid "
        f"WHERE {table} MATCH ?{where} ORDER BY r, m.ts DESC, m.id DESC LIMIT ?"
    )
    out: list[Hit] = []
    for file_id, ts, role, off, part, indexed, r in idx.conn.execute(
        sql, [q.fts, *args, f.limit]
    ).fetchall():
        text = texts.get(file_id, off, part, indexed)
        if text is not None:  # the line is gone: the file changed since the catch-up
            out.append(
                Hit(
                    file_id=file_id,
                    ts=ts,
                    role=role,
                    marked=scan_snippet(text, q.terms),
                    score=r,
                    off=off,
                )
            )
    return out


def _scan(idx: si.Index, texts: _Texts, q: Query, f: Filters) -> list[Hit]:
    """Every message in scope, newest first, read from its transcript and tested against the
    query in Python."""
    where, args = _filters(f)
    if q.unsegmented and all(t.unsegmented for t in q.terms):
        where += " AND m.cjk = 1"
    out: list[Hit] = []
    cur = idx.conn.execute(
        f"SELECT m.file_id, m.ts, m.role, m.off, m.part, m.text FROM msgs m WHERE 1{where} "
        "ORDER BY m.ts DESC, m.id DESC",
        args,
    )
    for file_id, ts, role, off, part, indexed in cur:
        text = texts.get(file_id, off, part, indexed)
        if text is not None and _matches(q.tree, text):
            out.append(
                Hit(
                    file_id=file_id,
                    ts=ts,
                    role=role,
                    marked=scan_snippet(text, q.terms),
                    score=None,
                    off=off,
                )
            )
            if len(out) >= f.limit:
                break
    return out
