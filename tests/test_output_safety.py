"""Output that cannot lie: control characters in keys, labels and messages are shown escaped in
text and TSV output (one row is one line, no terminal escape passes through), `--json` is
unchanged, timestamps no calendar can show render as `?`, and the reserved keys `global` and
`unknown` are refused as targets."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import run_cli, run_json

EVIL_KEY = "agent:main:evil\nagent:main:main"
ESC_KEY = "agent:main:x\x1b[2Jcleared"
TAB_KEY = "agent:main:tab\there"


def write_state(state: Path) -> None:
    sdir = state / "agents" / "main" / "sessions"
    sdir.mkdir(parents=True)
    now = 1_790_000_000_000
    store = {
        EVIL_KEY: {"sessionId": "s-evil", "updatedAt": now, "label": "lab\x1b]0;pwned\x07el"},
        ESC_KEY: {"sessionId": "s-esc", "updatedAt": now - 1000},
        TAB_KEY: {"sessionId": "s-tab", "updatedAt": 10**20},  # year > 9999
        "agent:main:past": {"sessionId": "s-past", "updatedAt": -(10**18)},
    }
    (sdir / "sessions.json").write_text(json.dumps(store))
    lines = [
        {"type": "session", "version": 3, "id": "s-evil", "timestamp": "2026-01-01T00:00:00Z"},
        {
            "type": "message",
            "id": "a",
            "message": {
                "role": "user",
                "content": "hi\x1b[31mred\nsecond line",
                "timestamp": 10**18,
            },
        },
        {
            "type": "message",
            "id": "b",
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": "ok\tdone"}],
                "timestamp": now,
            },
        },
    ]
    (sdir / "s-evil.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_keys_and_labels_are_escaped_in_text_output(state: Path) -> None:
    write_state(state)
    quiet = run_cli("list", "-q")
    assert quiet.returncode == 0, quiet.stderr
    rows = quiet.stdout.splitlines()
    assert len(rows) == 4, rows  # one line per session, whatever the keys hold
    assert "agent:main:main" not in rows and "main" not in rows
    assert "\x1b" not in quiet.stdout
    assert any(r.endswith("evil\\nagent:main:main") for r in rows), rows
    assert any("\\e[2Jcleared" in r for r in rows), rows
    assert any(r.endswith("tab\\there") for r in rows), rows

    tsv = run_cli("list")
    assert tsv.returncode == 0, tsv.stderr
    lines = tsv.stdout.splitlines()
    assert len(lines) == 4 and all(len(ln.split("\t")) == 8 for ln in lines), lines
    assert "\x1b" not in tsv.stdout and "\x07" not in tsv.stdout
    evil = next(ln for ln in lines if "evil" in ln)
    assert evil.split("\t")[3] == "lab\\e]0;pwned\\x07el"

    code, data = run_json("list")
    assert code == 0
    assert EVIL_KEY in {s["key"] for s in data["sessions"]}, "--json keeps the raw key"


def test_out_of_range_timestamps_render_as_question_mark(state: Path) -> None:
    write_state(state)
    tsv = run_cli("list")
    assert tsv.returncode == 0 and "internal error" not in tsv.stderr, tsv.stderr
    updated = {ln.split("\t")[0]: ln.split("\t")[4] for ln in tsv.stdout.splitlines()}
    assert updated["agent:main:tab\\there"] == "?" and updated["agent:main:past"] == "?", updated
    code, data = run_json("list")
    assert code == 0 and any(s.get("updatedAt") == 10**20 for s in data["sessions"])

    hist = run_cli("history", "s-evil")
    assert hist.returncode == 0, hist.stderr
    assert hist.stdout.startswith("[?] user:\n"), hist.stdout
    assert "\x1b" not in hist.stdout
    assert "hi\\e[31mred\nsecond line" in hist.stdout  # lines stay lines in a message body
    assert "ok\tdone" in hist.stdout
    md = run_cli("history", "s-evil", "--format", "markdown")
    assert md.returncode == 0 and "\x1b" not in md.stdout and "— ?" in md.stdout
    code, data = run_json("history", "s-evil")
    assert code == 0 and "\x1b[31m" in data["messages"][0]["content"]


def test_reserved_keys_are_not_targets(state: Path) -> None:
    for args in (
        ("send", "global", "hi"),
        ("send", "unknown", "hi"),
        ("label", "global", "x"),
        ("label", "unknown", "x"),
        ("--as", "unknown", "spawn", "task"),
        ("--as", "global", "send", "main", "hi"),
    ):
        proc = run_cli(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert "reserved key" in proc.stderr.splitlines()[0]
    assert not (state / "agents").exists(), "nothing was written"


def test_global_scope_main_session_is_still_a_target(state: Path) -> None:
    state.mkdir(parents=True)
    (state / "sessiontool.json5").write_text('{session: {scope: "global"}}')
    code, data = run_json("send", "main", "hi")
    assert code == 0, data
    assert data["reply"] == "echo: hi"


def test_c1_controls_and_bidi_overrides_are_escaped_like_esc(state: Path) -> None:
    """The same rule for every character that can drive a terminal or reorder a line: U+009B
    (CSI in one character), NEL, and the bidi embeddings, overrides, isolates and marks are
    shown as escapes in a label, a key and a message body, as ESC is (issue 37, item 11)."""
    sdir = state / "agents" / "main" / "sessions"
    sdir.mkdir(parents=True)
    evil = "\u202eexe.txt\u202c \x9b2J \u2067x\u2069 \u200f\u061c"
    shown = "\\u202eexe.txt\\u202c \\x9b2J \\u2067x\\u2069 \\u200f\\u061c"
    store = {
        f"agent:main:k{evil}": {
            "sessionId": "s-bidi",
            "updatedAt": 1_790_000_000_000,
            "label": f"lab{evil}",
        }
    }
    (sdir / "sessions.json").write_text(json.dumps(store))
    line = {
        "type": "message",
        "id": "a",
        "message": {"role": "user", "content": f"hi {evil}", "timestamp": 1_790_000_000_000},
    }
    (sdir / "s-bidi.jsonl").write_text(json.dumps(line) + "\n")
    raw = set("\x9b\u202e\u202c\u2067\u2069\u200f\u061c")
    tsv = run_cli("list")
    assert tsv.returncode == 0, tsv.stderr
    assert (
        tsv.stdout.split("\t")[0] == f"agent:main:k{shown}"
        and tsv.stdout.split("\t")[3] == f"lab{shown}"
    )
    table = run_cli("list", "--color", "always")
    hist = run_cli("history", "s-bidi")
    assert f"hi {shown}" in hist.stdout
    for out in (tsv.stdout, table.stdout, hist.stdout, hist.stderr):
        assert not raw & set(out), out
    code, data = run_json("history", "s-bidi")
    assert code == 0 and data["messages"][0]["content"] == f"hi {evil}"
