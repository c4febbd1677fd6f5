"""`history --format html` and `export --html` on the real fixtures (Clawdbot's JSONL store and
OpenClaw 2026.9.6's SQLite store): every message of every session is on its page (read back
with html.parser), links between pages resolve, nothing in a transcript runs or breaks a page,
and a re-run writes only what changed. Also `usage --by day`'s bars on a terminal."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from tests import htmlcheck
from tests.helpers import FIXTURE_STATE, run_cli, run_json, write_config

OC_STATE = Path(__file__).resolve().parent / "fixtures" / "openclaw-2026.9.6" / "state"
FIXTURES = {"clawdbot": FIXTURE_STATE, "openclaw": OC_STATE}
NASTY = (
    "<script>alert(1)</script></details></article><!-- x -->&amp; \x00 nul "
    "\x1b[31mred\x1b[0m \x9b2J \x07bell ]]> \ud800 end"
)


def _copy(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


def _full_key(key: str) -> str:
    """`list` shows the current agent's main session as `main`."""
    return "agent:main:main" if key == "main" else key


def _sessions(state: Path) -> dict[str, list[dict[str, Any]]]:
    """Full key → every message `history --json` gives (tool results included)."""
    rc, listed = run_json("--state-dir", str(state), "list", "--all-agents", "--limit", "all")
    assert rc == 0, listed
    out = {}
    for row in listed["sessions"]:
        rc, h = run_json(
            "--state-dir", str(state), "history", row["key"], "--include-tools", "--limit", "all"
        )
        assert rc == 0, h
        out[_full_key(row["key"])] = h["messages"]
    assert len(out) >= 10
    return out


def _index(site: Path) -> dict[str, Path]:
    """Full key → its page, as the index links it."""
    page = htmlcheck.Page((site / "index.html").read_text())
    out = {}
    for href in page.hrefs:
        if href.startswith("s/"):
            target = site / unquote(href)
            key = htmlcheck.read(target).title[0] if target.is_file() else ""
            out[key] = target
    return out


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Each fixture exported once for the module: name → (state, site, result, sessions)."""
    done: dict[str, Any] = {}

    def get(name: str) -> Any:
        if name not in done:
            base = tmp_path_factory.mktemp(name)
            state = _copy(FIXTURES[name], base / "state")
            site = base / "site"
            proc = run_cli(
                "--state-dir", str(state), "export", "--html", str(site), "--all-agents", "--json"
            )
            assert proc.returncode == 0, proc.stderr
            done[name] = (name, state, site, json.loads(proc.stdout), _sessions(state))
        return done[name]

    return get


@pytest.fixture(params=sorted(FIXTURES))
def exported(request: pytest.FixtureRequest, sites: Any) -> Any:
    return sites(request.param)


def test_export_html_every_message_of_every_session(exported: Any) -> None:
    name, _state, site, result, sessions = exported
    assert result["sessions"] == len(sessions)
    assert result["written"] == len(sessions) + 2  # the pages, the index, the usage page
    pages = _index(site)
    assert set(pages) == set(sessions), (name, set(pages) ^ set(sessions))
    total = 0
    for key, messages in sessions.items():
        page = htmlcheck.read(pages[key])
        htmlcheck.assert_all_messages(page, messages, f"{name} {key}")
        htmlcheck.assert_self_contained(page, key)
        total += len(messages)
    assert total > 40
    # The index lists every session with its message count.
    index = htmlcheck.read(site / "index.html")
    for key, messages in sessions.items():
        row = index.text[index.text.index(key + " ") :][:220]
        assert f" {len(messages):,} " in row.split("$")[0], (key, row)


def test_export_html_index_tokens_agree_with_usage(exported: Any) -> None:
    """Each session's tokens on the index are what `usage --by session` counts for it (on the
    SQLite store: every assistant turn, the silent ones the chat view hides included)."""
    name, state, site, _result, sessions = exported
    rc, usage = run_json("--state-dir", str(state), "usage", "--by", "session")
    assert rc == 0
    index = htmlcheck.read(site / "index.html").text
    compared = 0
    for row in usage["rows"]:
        key = _full_key(row["session"])
        if key not in sessions:
            continue  # an archived transcript: not exported
        tokens = row["input"] + row["output"] + row["cacheRead"] + row["cacheWrite"]
        cells = index[index.index(key + " ") :][:220].split("$")[0]
        assert f" {tokens:,} " in cells + " ", (name, key, tokens, cells)
        compared += 1
    assert compared >= 8


def test_export_html_links_resolve(exported: Any) -> None:
    name, _state, site, _result, _sessions_ = exported
    files = [site / "index.html", site / "usage.html", *sorted((site / "s").glob("*.html"))]
    checked = 0
    for f in files:
        page = htmlcheck.read(f)
        htmlcheck.assert_self_contained(page, str(f))
        for href in page.hrefs:
            parts = urlsplit(href)
            target = (f.parent / unquote(parts.path)).resolve() if parts.path else f
            assert target.is_file(), (name, f.name, href)
            assert site.resolve() in target.parents, href
            if parts.fragment:
                assert parts.fragment in htmlcheck.read(target).ids, (f.name, href)
            checked += 1
    assert checked > len(files)  # every page links back at least to the index and usage page


def test_export_html_spawn_links_between_parent_and_child(sites: Any) -> None:
    _name, _state, site, _result, _sessions_ = sites("openclaw")
    pages = _index(site)
    child = next(k for k in pages if ":subagent:" in k)
    parent, kid = htmlcheck.read(pages["agent:main:main"]), htmlcheck.read(pages[child])
    assert pages[child].name in parent.hrefs
    assert pages["agent:main:main"].name in kid.hrefs
    assert "Spawned by agent:main:main" in kid.text


def test_export_html_announce_links_to_the_child(sites: Any) -> None:
    """A Clawdbot-era announce (a user message whose Stats line names the child) links there."""
    _name, _state, site, _result, sessions = sites("clawdbot")
    pages = _index(site)
    parent = "agent:research:main"
    i, msg = next(
        (i, m)
        for i, m in enumerate(sessions[parent])
        if m["role"] == "user" and "Stats: " in json.dumps(m["content"])
    )
    child = next(k for k in pages if k.startswith("agent:research:subagent:"))
    page = htmlcheck.read(pages[parent])
    assert f"from {child} via announce" in page.text_of(i)
    assert pages[child].name in page.hrefs
    assert pages[parent].name in htmlcheck.read(pages[child]).hrefs  # spawned by, back


def test_export_html_reset_is_a_divider(sites: Any) -> None:
    _name, _state, site, _result, sessions = sites("openclaw")
    page = htmlcheck.read(_index(site)["agent:main:reset-me"])
    resets = [i for i, m in enumerate(sessions["agent:main:reset-me"]) if m["role"] == "system"]
    assert resets
    for i in resets:
        assert page.kinds[f"m{i}"] == "reset" and page.text_of(i).startswith("Reset")


def test_export_html_usage_page_charts(exported: Any) -> None:
    _name, _state, site, _result, sessions = exported
    usage = htmlcheck.read(site / "usage.html")
    # tokens per day (an SVG chart) and per model (rows of text and bars; no cost here)
    raw = (site / "usage.html").read_text()
    assert raw.count("<svg viewBox") == 1 and raw.count('<div class="hbars">') == 1
    assert "No cost: no price is configured" in usage.text
    days = {
        time.strftime("%Y-%m-%d", time.gmtime(m["timestamp"] / 1000))
        for msgs in sessions.values()
        for m in msgs
        if m.get("role") == "assistant" and m.get("usage")
    }
    tips = " ".join(usage.title)  # each bar's <title>: what a browser shows on hover
    assert days and all(f"{d}: input + output " in tips for d in days), tips
    assert "fake/fake-model: " in tips and "fake/fake-model" in usage.text
    assert usage.tags.get("tr", 0) >= len(days) + 3  # two tables: heads, days, models


def test_history_html_standalone_every_message(tmp_path: Path) -> None:
    for name, src in FIXTURES.items():
        state = _copy(src, tmp_path / name)
        rc, h = run_json("--state-dir", str(state), "history", "main", "--include-tools")
        out = tmp_path / f"{name}.html"
        proc = run_cli(
            "--state-dir", str(state), "history", "main", "--format", "html", "-o", str(out)
        )
        assert proc.returncode == 0 and proc.stdout == "", proc.stderr
        page = htmlcheck.read(out)
        htmlcheck.assert_all_messages(page, h["messages"], name)
        htmlcheck.assert_self_contained(page, name)
        assert all(href.startswith("#") for href in page.hrefs)  # nothing else is beside it
        assert any(m.get("role") == "toolResult" for m in h["messages"])  # results folded in
        assert page.tags.get("details", 0) >= sum(m["role"] == "toolResult" for m in h["messages"])
        assert out.stat().st_mode & 0o777 == 0o600


def test_history_html_to_stdout_and_follow_refused(tmp_path: Path) -> None:
    state = _copy(FIXTURE_STATE, tmp_path / "state")
    proc = run_cli("--state-dir", str(state), "history", "main", "--format", "html")
    assert proc.returncode == 0
    assert proc.stdout.startswith("<!DOCTYPE html>") and proc.stdout.endswith("</html>\n")
    bad = run_cli("--state-dir", str(state), "history", "main", "--format", "html", "-f")
    assert bad.returncode == 2 and "--follow" in bad.stderr and bad.stdout == ""


def _append(state: Path, key: str, *messages: dict[str, Any]) -> None:
    """Add messages to a session of the Clawdbot fixture (a JSONL store), as OpenClaw would."""
    store_path = state / "agents" / "main" / "sessions" / "sessions.json"
    store = json.loads(store_path.read_text())
    entry = store[key]
    path = store_path.parent / f"{entry['sessionId']}.jsonl"
    with path.open("a", encoding="utf-8") as fh:
        for i, m in enumerate(messages):
            line = {"type": "message", "id": f"added{i}", "parentId": None, "message": m}
            fh.write(json.dumps(line, ensure_ascii=True) + "\n")
    entry["updatedAt"] = entry["updatedAt"] + 1000
    store_path.write_text(json.dumps(store, indent=2))


def test_hostile_text_renders_as_text(tmp_path: Path) -> None:
    state = _copy(FIXTURE_STATE, tmp_path / "state")
    ts = 1795292600000
    _append(
        state,
        "agent:main:dm:alice",
        {"role": "user", "content": NASTY, "timestamp": ts},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": NASTY},
                {"type": "toolCall", "id": "c1", "name": "exec", "arguments": {"command": NASTY}},
            ],
            "timestamp": ts + 1,
        },
        {
            "role": "toolResult",
            "toolCallId": "c1",
            "toolName": "exec</summary>",
            "content": [{"type": "text", "text": NASTY + "\n" * 50 + NASTY}],
            "timestamp": ts + 2,
        },
    )
    out = tmp_path / "alice.html"
    proc = run_cli(
        "--state-dir",
        str(state),
        "history",
        "agent:main:dm:alice",
        "--format",
        "html",
        "-o",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    raw = out.read_bytes()
    raw.decode("utf-8")  # valid UTF-8 (the lone surrogate became U+FFFD)
    for byte in (b"\x00", b"\x1b", b"\x07", "\x9b".encode()):
        assert byte not in raw
    page = htmlcheck.Page(raw.decode())
    htmlcheck.assert_self_contained(page, "alice")
    n = len(page.messages)
    shown = (
        "<script>alert(1)</script></details></article><!-- x -->&amp; \\x00 nul \\e[31mred\\e[0m"
    )
    for i in (n - 3, n - 2, n - 1):
        assert shown in page.text_of(i), page.text_of(i)
        assert "\\x9b2J \\x07bell ]]> \ufffd end" in page.text_of(i)
    # Markup in the text made no elements: one <details> per tool call and result, one fold.
    assert page.tags.get("script") is None and page.tags.get("article") == n
    assert page.text_of(n - 1).count(NASTY[:20]) == 2  # both copies, across the fold
    assert "exec</summary>" in page.text_of(n - 1)


def test_inter_session_message_links_to_its_source(tmp_path: Path) -> None:
    state = _copy(FIXTURE_STATE, tmp_path / "state")
    _append(
        state,
        "agent:main:dm:alice",
        {
            "role": "user",
            "content": "Note from the group session",
            "timestamp": 1795292600000,
            "provenance": {
                "kind": "inter_session",
                "sourceSessionKey": "agent:main:telegram:group:-100777",
                "sourceTool": "sessions_send",
            },
        },
    )
    site = tmp_path / "site"
    proc = run_cli("--state-dir", str(state), "export", "--html", str(site))
    assert proc.returncode == 0, proc.stderr
    pages = _index(site)
    page = htmlcheck.read(pages["agent:main:dm:alice"])
    last = page.text_of(len(page.messages) - 1)
    assert "from agent:main:telegram:group:-100777 via sessions_send" in last
    assert pages["agent:main:telegram:group:-100777"].name in page.hrefs
    # Alone (history), the source has no page beside it: named, not linked.
    alone = run_cli("--state-dir", str(state), "history", "agent:main:dm:alice", "--format", "html")
    assert "from agent:main:telegram:group:-100777" in htmlcheck.Page(alone.stdout).text
    assert all(h.startswith("#") for h in htmlcheck.Page(alone.stdout).hrefs)


def test_export_html_rerun_rewrites_only_what_changed(tmp_path: Path) -> None:
    state = _copy(FIXTURE_STATE, tmp_path / "state")
    site = tmp_path / "site"
    args = ("--state-dir", str(state), "export", "--html", str(site), "--all-agents")
    rc, first = run_json(*args)
    assert rc == 0 and first["written"] == first["pages"] and first["unchanged"] == 0
    assert set(first) == {"to", "sessions", "pages", "written", "unchanged"}  # the JSON contract
    before = {p: p.stat().st_mtime_ns for p in site.rglob("*.html")}
    rc, again = run_json(*args)
    assert rc == 0 and again["written"] == 0 and again["unchanged"] == first["pages"]
    assert {p: p.stat().st_mtime_ns for p in site.rglob("*.html")} == before
    _append(state, "agent:main:dm:alice", {"role": "user", "content": "one more", "timestamp": 1})
    rc, third = run_json(*args)
    assert rc == 0 and third["written"] == 2, third  # alice's page and the index
    changed = {p for p in site.rglob("*.html") if p.stat().st_mtime_ns != before[p]}
    alice = _index(site)["agent:main:dm:alice"]
    assert changed == {alice, site / "index.html"}
    assert "one more" in htmlcheck.read(alice).text


def test_export_html_since_and_bad_input(tmp_path: Path) -> None:
    state = _copy(OC_STATE, tmp_path / "state")
    site = tmp_path / "site"
    since = ("--since", "2026-11-22T18:43:00Z")
    rc, listed = run_json("--state-dir", str(state), "list", *since)
    assert rc == 0 and 0 < listed["count"] < 10
    rc, res = run_json("--state-dir", str(state), "export", "--html", str(site), *since)
    assert rc == 0 and res["sessions"] == listed["count"], res
    assert set(_index(site)) == {_full_key(r["key"]) for r in listed["sessions"]}
    for bad in (
        ("export",),
        ("export", "--to", str(tmp_path / "a"), "--html", str(tmp_path / "b")),
        ("export", "--html", str(state / "inside")),
        ("export", "--to", str(tmp_path / "c"), "--since", "1d"),
    ):
        proc = run_cli("--state-dir", str(state), *bad)
        assert proc.returncode == 2 and proc.stderr.count("\n") <= 2 and "error" in proc.stderr, bad
    assert not (state / "inside").exists() and not (tmp_path / "c").exists()


def test_usage_by_day_draws_bars_on_a_terminal(tmp_path: Path) -> None:
    state = _copy(FIXTURE_STATE, tmp_path / "state")
    _append(
        state,
        "agent:main:dm:alice",
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "a day later"}],
            "provider": "fake",
            "model": "fake-model",
            "usage": {"input": 100_000, "output": 0, "cacheRead": 0, "cacheWrite": 0},
            "timestamp": 1795292600000 + 86_400_000,
        },
    )
    term = run_cli("--state-dir", str(state), "--color", "always", "usage", "--by", "day")
    assert term.returncode == 0, term.stderr
    rows = {ln.split()[0]: ln for ln in term.stdout.splitlines() if ln[:2] in ("20", "TO")}
    assert set(rows) == {"2026-11-21", "2026-11-22", "TOTAL"}
    full = rows["2026-11-21"].count("█")
    assert full == 30  # the biggest day (364k tokens) fills the bar
    assert 6 <= rows["2026-11-22"].count("█") <= 9  # 100k of 364k: about 8 cells of 30
    assert "█" not in rows["TOTAL"]
    piped = run_cli("--state-dir", str(state), "usage", "--by", "day")
    assert "█" not in piped.stdout
    assert [len(ln.split("\t")) for ln in piped.stdout.splitlines()] == [8, 8, 8]  # no header


def test_export_html_usage_page_costs_each_turn_at_its_price(tmp_path: Path) -> None:
    """With prices configured, the usage page's cost per day is every exported session's
    assistant turns priced by hand (archived transcripts are not exported, so not counted)."""
    state = _copy(FIXTURE_STATE, tmp_path / "state")
    price = {"input": 3.0, "output": 15.0, "cacheRead": 0.3, "cacheWrite": 3.75}
    models = [{"id": "fake-model", "cost": price}]
    write_config(state, {"models": {"providers": {"fake": {"models": models}}}})
    expected: dict[str, float] = {}
    for store in sorted((state / "agents").glob("*/sessions/sessions.json")):
        # One transcript per session id (a legacy key may name the same session twice).
        for sid in {e["sessionId"] for e in json.loads(store.read_text()).values()}:
            path = store.parent / f"{sid}.jsonl"
            for line in path.read_text().splitlines() if path.is_file() else []:
                msg = json.loads(line).get("message") or {}
                u = msg.get("usage")
                if msg.get("role") != "assistant" or not isinstance(u, dict):
                    continue
                day = time.strftime("%Y-%m-%d", time.gmtime(msg["timestamp"] / 1000))
                cost = sum(u.get(f, 0) * p for f, p in price.items()) / 1_000_000
                expected[day] = expected.get(day, 0.0) + cost
    assert expected and sum(expected.values()) > 0.5
    site = tmp_path / "site"
    rc, _res = run_json("--state-dir", str(state), "export", "--html", str(site), "--all-agents")
    assert rc == 0
    usage = htmlcheck.read(site / "usage.html")
    raw = (site / "usage.html").read_text()  # cost and tokens, per day and per model
    assert raw.count("<svg viewBox") == 2 and raw.count('<div class="hbars">') == 2
    tips = " ".join(usage.title)
    for day, cost in expected.items():
        assert f"{day}: cost ${cost:.2f}" in tips, (day, cost, tips)
        assert f"${cost:.4f}" in usage.text


@pytest.mark.parametrize("ending", ["", "\n"], ids=["no-final-newline", "final-newline"])
def test_a_folded_message_counts_the_lines_it_hides_and_starts_with_the_next(
    state: Path, ending: str
) -> None:
    """An 80-line message showed "61 more lines" (60 are hidden) and its unfolded part began
    with a blank line (issue 33, item 6): the newline between the two parts was counted and
    shown. Both the plain fold (the user's text) and the Markdown fold (the reply) say 60."""
    message = "\n".join(f"line {i}" for i in range(1, 81)) + ending
    assert run_cli("send", "main", message).returncode == 0
    proc = run_cli("history", "main", "--format", "html")
    assert proc.returncode == 0, proc.stderr
    page = proc.stdout
    marker = '<details class="more"><summary>'
    folds = [part.split("</details>", 1)[0] for part in page.split(marker)[1:]]
    assert len(folds) == 2, folds  # the user's message, then the echoed reply
    for fold in folds:
        label, body = fold.split("</summary>", 1)
        assert label == "60 more lines", label
        assert body.startswith(("<p>line 21\n", '<div class="md"><p>line 21<')), body[:40]
        assert "line 20\n" not in body and "line 20<" not in body and "line 80" in body
