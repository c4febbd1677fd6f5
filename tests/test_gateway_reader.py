"""The gateway reader's mapping, against what the real 2026.9.6 gateway answered on the fixture
(`expected/gateway/`: sessions.list and chat.history of every key, captured from the program):
each row and each transcript read through it equals the direct read of the same database,
except for the differences the README names. The live gateway is in
tests/interop_openclaw/test_remote_reads.py."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from sessiontool.context import build_context
from sessiontool.openclaw import gateway, gateway_reader
from sessiontool.sessions.listing import build_row
from sessiontool.state.detect import StoreInfo, detect
from sessiontool.state.openclaw_sqlite import SqliteReader

OC = Path(__file__).resolve().parent / "fixtures" / "openclaw-2026.9.6"
CAPTURED = OC / "expected" / "gateway"


def _file_part(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", key)


@pytest.fixture
def oc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the fixture, and a stand-in for `gateway.call` that answers with what the real
    gateway answered (and checks what it is asked)."""
    state = tmp_path / "state"
    shutil.copytree(OC / "state", state)
    asked: list[tuple[str, dict[str, Any]]] = []

    def call(paths: Any, method: str, params: dict[str, Any], **kw: Any) -> dict[str, Any]:
        asked.append((method, params))
        if method == "sessions.list":
            assert params["includeGlobal"] is True and params["includeUnknown"] is True
            data: dict[str, Any] = json.loads((CAPTURED / "sessions.list.all.json").read_text())
            return data
        assert method == "chat.history" and params["maxChars"] == 500_000
        assert params["limit"] == 1000
        name = f"chat.history.{_file_part(params['sessionKey'])}.json"
        data = json.loads((CAPTURED / name).read_text())
        return data

    monkeypatch.setattr(gateway_reader, "_call", call)
    monkeypatch.setattr(gateway.Gateway, "reachable", lambda self: True)
    gateway_reader._rows.clear()
    return state


def _readers(state: Path, agent: str) -> tuple[SqliteReader, gateway_reader.GatewayReader]:
    ctx = build_context(state)
    info = detect(ctx.paths, agent)
    via = StoreInfo(agent, "gateway", Path("ws://gw"), "test")
    return SqliteReader(ctx.paths, info), gateway_reader.GatewayReader(ctx.paths, via)


def test_every_row_maps_to_the_local_row_modulo_the_documented_differences(oc: Path) -> None:
    ctx = build_context(oc)
    assert gateway_reader.agent_ids(ctx.paths) == ["main", "ops"]
    seen = 0
    for agent in ("main", "ops"):
        direct, via = _readers(oc, agent)
        local, remote = direct.sessions(), via.sessions()
        assert sorted(remote) == sorted(local)
        for key, f in local.items():
            want = build_row(ctx, agent, key, f.entry)
            got = build_row(ctx, agent, key, remote[key].entry)
            if "label" in want and "displayName" in want:  # the gateway shows the label
                assert "displayName" not in got
                got["displayName"] = want["displayName"]
            for field in ("model", "contextTokens"):  # the gateway's defaults
                if field not in want:
                    got.pop(field, None)
            for field in ("modelOverride", "providerOverride"):  # not in a sessions.list row
                if field not in got:
                    want.pop(field, None)
            assert got == want, key
            seen += 1
        direct.close()
        via.close()
    assert seen == 12


def test_every_transcript_maps_to_the_local_read_and_cut_texts_are_flagged(oc: Path) -> None:
    flagged = 0
    for agent in ("main", "ops"):
        direct, via = _readers(oc, agent)
        for key, f in direct.sessions().items():
            one = gateway_reader.GatewayReader(via.paths, via.info).session(key)
            assert one is not None and one.entry == via.sessions()[key].entry  # one call
            want = direct.messages(key, f.entry, None).messages
            got = via.messages(key, f.entry, None).messages
            assert len(got) == len(want), key
            for mine, theirs in zip(want, got, strict=True):
                if mine.get("role") == "custom":  # the gateway renders nested tool records
                    assert theirs.get("customType") == mine.get("customType")
                    continue
                if theirs.get("truncated") is True:
                    # Cut by the gateway (these answers were captured with its 8,000 default):
                    # flagged, and the start of the whole text.
                    flagged += 1
                    theirs = dict(theirs)
                    del theirs["truncated"]
                    for a, b in zip(mine["content"], theirs["content"], strict=True):
                        assert a["text"].startswith(b["text"]) and len(b["text"]) == 8000
                    theirs["content"] = mine["content"]
                assert theirs == mine, key
            limited = via.messages(key, f.entry, 2, lambda m: m.get("role") != "toolResult")
            assert limited.messages == [m for m in got if m.get("role") != "toolResult"][-2:]
        direct.close()
        via.close()
    assert flagged >= 1  # the fixture has long tool results


def test_a_cut_message_makes_history_json_say_truncated(oc: Path) -> None:
    from sessiontool.sessions.history import History
    from sessiontool.sessions.resolve import Resolved

    msg, cut = gateway_reader.message_of(
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "x" * 20 + "\n...(truncated)..."}],
            "__openclaw": {"id": "m1", "seq": 4, "runId": "r1"},
        }
    )
    assert cut and msg["truncated"] is True and msg["__openclaw"] == {"runId": "r1"}
    r = Resolved("main", "agent:main:main", None, oc, oc)
    assert History("main", None, [msg], None, r).to_json()["truncated"] is True
    plain, cut = gateway_reader.message_of({"role": "user", "content": "short"})
    assert not cut and "truncated" not in History("main", None, [plain], None, r).to_json()
