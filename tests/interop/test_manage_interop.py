"""Session management across the two programs: a reset or delete by one is what the other sees, and
the real program carries on from a run sessiontool recorded as failed."""

from __future__ import annotations

import uuid

from .conftest import Harness
from .support import assert_linear_chain, text_of


def _listed(cb: Harness) -> dict[str, dict]:
    return {r["key"]: r for r in cb.call("sessions.list", {})["sessions"]}


def test_sessiontool_reset_and_delete_as_the_gateway_sees_them(cb: Harness) -> None:
    erin, frank = "agent:main:dm:interop-erin", "agent:main:dm:interop-frank"
    for key in (erin, frank):
        cb.st_json("send", key, f"hello {key}", "--timeout", "60")
    cb.st_json("label", erin, "erin-label")
    old_erin = cb.store()[erin]["sessionId"]
    frank_sid = cb.store()[frank]["sessionId"]

    new_erin = cb.st_json("reset", erin)["entry"]["sessionId"]
    assert new_erin != old_erin
    assert cb.st_json("delete", frank)["entry"] is None

    listed = _listed(cb)
    assert frank not in listed
    row = listed[erin]
    assert (row["sessionId"], row.get("label"), row.get("totalTokens"), row.get("systemSent")) == (
        new_erin,
        "erin-label",
        0,
        False,
    )
    hist = cb.history(erin)
    assert hist["sessionId"] == new_erin and hist["messages"] == []
    gone = cb.history(frank)
    assert gone.get("sessionId") is None and gone["messages"] == []
    # sessiontool archived the transcript under the gateway's naming (<file>.deleted.<ISO, ':'->'-'>)
    archived = list(cb.sessions_dir().glob(f"{frank_sid}.jsonl.deleted.*"))
    assert len(archived) == 1 and ":" not in archived[0].name
    assert (cb.sessions_dir() / f"{old_erin}.jsonl").is_file()  # the old transcript stays

    # the real program starts the new conversation in the new transcript
    res = cb.agent_turn(erin, "erin: after the reset", f"interop-{uuid.uuid4()}")
    assert res["result"]["meta"]["agentMeta"]["sessionId"] == new_erin
    assert res["result"]["payloads"][0]["text"] == "REPLY-1 | erin: after the reset"
    st = cb.st_json("history", erin, "--include-tools")
    assert st["sessionId"] == new_erin and st["messages"] == cb.history(erin)["messages"]
    assert len(st["messages"]) == 2


def test_gateway_reset_and_delete_as_sessiontool_sees_them(cb: Harness) -> None:
    gia, hal = "agent:main:dm:interop-gia", "agent:main:dm:interop-hal"
    for key in (gia, hal):
        cb.st_json("send", key, f"hello {key}", "--timeout", "60")
    cb.st_json("policy", gia, "deny")
    old_gia = cb.store()[gia]["sessionId"]
    hal_sid = cb.store()[hal]["sessionId"]

    reset = cb.call("sessions.reset", {"key": gia})
    new_gia = reset["entry"]["sessionId"]
    assert new_gia != old_gia
    deleted = cb.call("sessions.delete", {"key": hal, "deleteTranscript": True})
    assert deleted["deleted"] is True and len(deleted["archived"]) == 1

    rows = {r["key"]: r for r in cb.st_json("list", "--limit", "all")["sessions"]}
    assert hal not in rows
    assert (rows[gia]["sessionId"], rows[gia].get("totalTokens"), rows[gia].get("sendPolicy")) == (
        new_gia,
        0,
        "deny",
    )
    hist = cb.st_json("history", gia)
    assert hist["sessionId"] == new_gia and hist["messages"] == []
    proc = cb.st("history", hal, "--json")
    assert proc.returncode == 3, (proc.returncode, proc.stdout, proc.stderr)
    assert list(cb.sessions_dir().glob(f"{hal_sid}.jsonl.deleted.*"))
    # sessiontool sends into the session the gateway reset... once the override allows it
    assert cb.st("send", gia, "blocked", "--json").returncode == 4
    cb.st_json("policy", gia, "inherit")
    cb.st_json("send", gia, "gia: after the reset", "--timeout", "60")
    assert cb.store()[gia]["sessionId"] == new_gia
    assert [text_of(m) for m in cb.history(gia)["messages"]] == [
        "gia: after the reset",
        "echo: gia: after the reset",
    ]


def test_gateway_continues_after_a_failed_sessiontool_run(cb: Harness) -> None:
    """Agent qa's sessiontool runner fails: the transcript gets sessiontool's error turn (an
    assistant message with no content, stopReason error). The real program reads past it."""
    key = "agent:qa:dm:interop-ivy"
    proc = cb.st("send", key, "ivy: this run fails", "--json", "--timeout", "60")
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    lines = cb.transcript_lines(key, agent="qa")
    failed = lines[-1]["message"]
    assert (failed["role"], failed["stopReason"]) == ("assistant", "error")
    assert "fails on purpose" in failed.get("errorMessage", "")

    res = cb.agent_turn(key, "ivy: second try, via the gateway", f"interop-{uuid.uuid4()}")
    # The real program leaves a failed assistant turn out of the model's context (as it does its
    # own), so the model sees the two user messages back to back (the fake LLM joins them).
    text = res["result"]["payloads"][0]["text"]
    assert text == "REPLY-2 | ivy: this run fails ivy: second try, via the gateway", text
    lines = cb.transcript_lines(key, agent="qa")
    assert_linear_chain(lines)
    st = cb.st_json("history", key, "--include-tools")["messages"]
    assert st == cb.history(key)["messages"]
    assert [m["role"] for m in st] == ["user", "assistant", "user", "assistant"]
