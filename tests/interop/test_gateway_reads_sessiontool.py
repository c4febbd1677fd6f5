"""The real gateway lists and reads a state dir that sessiontool wrote.

sessiontool (echo runner) sends to several keys of two agents — the main session, a bare `cron:`
key, a group key, a direct key, another agent's main — and spawns a sub-agent whose announce lands
in main. Then the real `sessions.list` and `chat.history` must see exactly what `sessiontool list`
and `sessiontool history` see.

Differences that are allowed, and why (all documented in the spec, §3-§4):
* rows: the key of the main session is `agent:main:main` in the gateway and `main` in sessiontool
  (display form); `kind` uses two vocabularies (gateway: direct/group; sessiontool: main, group,
  cron, hook, node, other), so only "is it a group" is compared; `channel`, `displayName`,
  `transcriptPath` and `deliveryContext` are derived differently and are not compared.
* messages: none. `chat.history` returns every message including tool results, so sessiontool's
  side is read with `--include-tools` (its default drops `toolResult` messages, as
  sessions_history does); both strip channel envelopes, and these messages have none.
"""

from __future__ import annotations

from typing import Any

from .conftest import Harness
from .support import full_key, poll, text_of

SENDS = [
    ("main", "hello from sessiontool"),
    ("main", 'second line\nwith a newline, "quotes", a tab\tand ünïcödé ✓ 🚀'),
    ("agent:main:discord:group:interop-42", "hi group"),
    ("cron:interop-nightly", "nightly run"),
    ("agent:main:dm:interop-bob", "hi bob"),
    ("agent:main:dm:interop-bob", "bob again"),
    ("agent:ops:main", "ops hello"),
]
KEYS = {
    "agent:main:main",
    "agent:main:discord:group:interop-42",
    "agent:main:cron:interop-nightly",
    "agent:main:dm:interop-bob",
    "agent:ops:main",
}


def _ours(cb: Harness) -> dict[str, dict[str, Any]]:
    rows = cb.st_json("list", "--all-agents", "--limit", "all")["sessions"]
    return {full_key(r["key"]): r for r in rows}


def test_gateway_lists_and_reads_what_sessiontool_wrote(cb: Harness) -> None:
    for key, message in SENDS:
        out = cb.st_json("send", key, message, "--timeout", "60")
        assert out["status"] == "ok" and out["reply"] == f"echo: {message}", out
    spawn = cb.st_json("spawn", "list three interop facts", "--label", "interop-poet")
    child = spawn["childSessionKey"]

    def announced() -> dict[str, Any] | None:
        rec = cb.st_json("runs", spawn["runId"])
        return rec if rec.get("announcedAt") else None

    rec = poll(announced, 60, "the spawn's announce")
    assert rec["status"] == "ok", rec

    ours = _ours(cb)
    mine = KEYS | {child}
    assert mine <= set(ours), sorted(ours)

    # -- sessions.list, through the real `clawdbot gateway call` command ----------------------
    listing = cb.cli_call("sessions.list", {})
    theirs = {row["key"]: row for row in listing["sessions"]}
    assert set(theirs) == set(ours), (sorted(theirs), sorted(ours))
    for key in mine:
        a, b = ours[key], theirs[key]
        for name in ("sessionId", "updatedAt", "label", "totalTokens", "model"):
            assert a.get(name) == b.get(name), (key, name, a.get(name), b.get(name))
        assert (a["kind"] == "group") == (b["kind"] == "group"), (key, a["kind"], b["kind"])
    assert theirs["agent:main:discord:group:interop-42"]["kind"] == "group"
    # both newest first (by the updatedAt sessiontool wrote)
    stamps_theirs = [ours[row["key"]]["updatedAt"] for row in listing["sessions"]]
    stamps_ours = [
        r["updatedAt"] for r in cb.st_json("list", "--all-agents", "--limit", "all")["sessions"]
    ]
    assert stamps_theirs == sorted(stamps_theirs, reverse=True) == stamps_ours

    # the gateway's filters understand the fields sessiontool wrote
    calls = [
        {"method": "sessions.list", "params": {"spawnedBy": "agent:main:main"}},
        {"method": "sessions.list", "params": {"label": "interop-poet"}},
        {"method": "sessions.list", "params": {"agentId": "ops"}},
        {"method": "sessions.resolve", "params": {"label": "interop-poet"}},
    ]
    by_parent, by_label, ops, resolved = (r["result"] for r in cb.gw(calls))
    assert [r["key"] for r in by_parent["sessions"]] == [child]
    assert [r["key"] for r in by_label["sessions"]] == [child]
    assert [r["key"] for r in ops["sessions"]] == ["agent:ops:main"]
    assert resolved["key"] == child

    # -- chat.history == sessiontool history, message for message --------------------------
    keys = sorted(mine)
    results = cb.gw(
        [{"method": "chat.history", "params": {"sessionKey": k, "limit": 1000}} for k in keys]
    )
    for key, res in zip(keys, results, strict=True):
        assert res["ok"], (key, res)
        gw_hist = res["result"]
        st_hist = cb.st_json("history", key, "--include-tools", "--limit", "1000")
        assert gw_hist["sessionId"] == st_hist["sessionId"] == ours[key]["sessionId"], key
        assert gw_hist["messages"] == st_hist["messages"], key
        assert gw_hist["messages"], key

    main = cb.history("agent:main:main")["messages"]
    assert [text_of(m) for m in main[:4]] == [
        SENDS[0][1],
        f"echo: {SENDS[0][1]}",
        SENDS[1][1],
        f"echo: {SENDS[1][1]}",
    ]
    announce = main[-1]
    assert announce["role"] == "assistant" and announce["stopReason"] == "injected"
    assert text_of(announce).startswith("Status: ok\nResult: ")
    assert f"sessionKey {child}" in text_of(announce)
    bob = cb.history("agent:main:dm:interop-bob")["messages"]
    assert [m["role"] for m in bob] == ["user", "assistant", "user", "assistant"]
    # the bare key was stored in full, and both programs read it by its bare form too
    bare = cb.history("cron:interop-nightly")
    assert bare["sessionId"] == ours["agent:main:cron:interop-nightly"]["sessionId"]
