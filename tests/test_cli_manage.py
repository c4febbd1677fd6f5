"""`label`, `reset`, `delete`, `paths` and `prune` end to end (the real CLI on tmp state dirs,
checking the files on disk), plus the output conventions of spec §1 that every command shares:
TSV when piped, NO_COLOR, Markdown export."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_cli, run_json

from .runhelpers import NOW, PINNED, read_store, sessions_dir, write_store, write_transcript

DAY = 86_400_000


@pytest.fixture
def basic(state: Path) -> Path:
    """main (with a transcript), a labelled DM with settings worth keeping, a cron session."""
    write_store(
        state,
        {
            "agent:main:main": {
                "sessionId": "11111111-1111-4111-8111-111111111111",
                "updatedAt": NOW - 5000,
                "totalTokens": 50,
            },
            "agent:main:dm:alice": {
                "sessionId": "22222222-2222-4222-8222-222222222222",
                "updatedAt": NOW - 3000,
                "label": "book-club",
                "thinkingLevel": "medium",
                "verboseLevel": "on",
                "modelOverride": "gpt-x",
                "providerOverride": "openai",
                "sendPolicy": "deny",
                "deliveryContext": {"channel": "telegram", "to": "+1555"},
                "lastChannel": "telegram",
                "systemSent": True,
                "abortedLastRun": True,
                "inputTokens": 1200,
                "outputTokens": 34,
                "totalTokens": 1234,
                "sessionFile": "22222222-2222-4222-8222-222222222222.jsonl",
                "skillsSnapshot": {"prompt": "kept as is"},
            },
            "agent:main:cron:nightly": {
                "sessionId": "33333333-3333-4333-8333-333333333333",
                "updatedAt": NOW - 1000,
            },
        },
    )
    write_transcript(state, "11111111-1111-4111-8111-111111111111", [("user", "hi", NOW - 6000)])
    write_transcript(
        state,
        "22222222-2222-4222-8222-222222222222",
        [("user", "what are we reading?", NOW - 4000), ("assistant", "Middlemarch.", NOW - 3500)],
    )
    return state


# -- label -----------------------------------------------------------------------------------


def test_label_sets_and_prints_the_entry(basic: Path) -> None:
    rc, data = run_json("label", "agent:main:cron:nightly", "nightly-digest", env=PINNED)
    assert rc == 0, data
    assert data["sessionKey"] == "agent:main:cron:nightly"
    assert data["entry"]["label"] == "nightly-digest"
    assert data["entry"]["sessionId"] == "33333333-3333-4333-8333-333333333333"
    stored = read_store(basic)["agent:main:cron:nightly"]
    assert stored["label"] == "nightly-digest"
    assert stored["updatedAt"] == NOW  # sessions.patch bumps updatedAt
    # Found again by its label.
    rc, hist = run_json("history", "--label", "nightly-digest")
    assert rc == 0 and hist["sessionKey"] == "agent:main:cron:nightly"


def test_label_human_line_and_main_display(basic: Path) -> None:
    proc = run_cli("label", "main", "home")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "main\tlabel: home\n"
    assert read_store(basic)["agent:main:main"]["label"] == "home"


def test_label_length_limit(basic: Path) -> None:
    before = read_store(basic)
    proc = run_cli("label", "agent:main:cron:nightly", "x" * 65)
    assert proc.returncode == 2
    assert "64" in proc.stderr
    assert read_store(basic) == before
    rc, data = run_json("label", "agent:main:cron:nightly", "y" * 64)
    assert rc == 0 and data["entry"]["label"] == "y" * 64


def test_label_refuses_empty_and_duplicate(basic: Path) -> None:
    assert run_cli("label", "agent:main:cron:nightly", "   ").returncode == 2
    proc = run_cli("label", "agent:main:cron:nightly", "book-club")
    assert proc.returncode == 2
    assert "already in use" in proc.stderr
    assert "label" not in read_store(basic)["agent:main:cron:nightly"]


def test_relabel_by_label(basic: Path) -> None:
    rc, data = run_json("label", "--label", "book-club", "reading-group")
    assert rc == 0, data
    assert data["sessionKey"] == "agent:main:dm:alice"
    assert read_store(basic)["agent:main:dm:alice"]["label"] == "reading-group"


def test_label_unknown_key_and_label(basic: Path) -> None:
    rc, data = run_json("label", "agent:main:nope", "x")
    assert rc == 3 and data["code"] == 3 and "Session not found" in data["error"]
    assert run_cli("label", "--label", "no-such-label", "x").returncode == 3


def test_manage_commands_are_operator_only(basic: Path) -> None:
    before = read_store(basic)
    for args in (["label", "main", "x"], ["reset", "main"], ["delete", "agent:main:cron:nightly"]):
        rc, data = run_json("--as", "main", *args)
        assert rc == 4, (args, data)
        assert data["status"] == "forbidden"
        assert "operator" in data["error"]
    assert read_store(basic) == before


# -- reset -----------------------------------------------------------------------------------


def test_reset_new_id_zero_tokens_keeps_settings_and_old_transcript(basic: Path) -> None:
    old_id = "22222222-2222-4222-8222-222222222222"
    old_transcript = sessions_dir(basic) / f"{old_id}.jsonl"
    old_bytes = old_transcript.read_bytes()
    rc, data = run_json("reset", "agent:main:dm:alice", env=PINNED)
    assert rc == 0, data
    entry = data["entry"]
    assert data["sessionKey"] == "agent:main:dm:alice"
    new_id = entry["sessionId"]
    assert new_id != old_id and uuid.UUID(new_id).version == 4
    assert (entry["inputTokens"], entry["outputTokens"], entry["totalTokens"]) == (0, 0, 0)
    assert entry["systemSent"] is False
    assert entry["updatedAt"] == NOW
    for k, v in {
        "label": "book-club",
        "thinkingLevel": "medium",
        "verboseLevel": "on",
        "modelOverride": "gpt-x",
        "providerOverride": "openai",
        "sendPolicy": "deny",
        "deliveryContext": {"channel": "telegram", "to": "+1555"},
        "skillsSnapshot": {"prompt": "kept as is"},
    }.items():
        assert entry[k] == v, k
    assert "sessionFile" not in entry  # the path follows the new id
    assert read_store(basic)["agent:main:dm:alice"] == entry
    # The old transcript stays on disk untouched; no new one exists until the next message.
    assert old_transcript.read_bytes() == old_bytes
    assert not (sessions_dir(basic) / f"{new_id}.jsonl").exists()
    rc, hist = run_json("history", "agent:main:dm:alice")
    assert rc == 0 and hist["messages"] == [] and hist["sessionId"] == new_id


def test_reset_by_label_human_output(basic: Path) -> None:
    proc = run_cli("reset", "--label", "book-club")
    assert proc.returncode == 0, proc.stderr
    new_id = read_store(basic)["agent:main:dm:alice"]["sessionId"]
    assert proc.stdout == f"agent:main:dm:alice\tnew sessionId: {new_id}\n"


def test_reset_moves_a_legacy_bare_key_to_the_full_key(state: Path) -> None:
    write_store(
        state, {"cron:job-1": {"sessionId": "legacy-1", "updatedAt": NOW - 10, "label": "job"}}
    )
    rc, data = run_json("reset", "cron:job-1")
    assert rc == 0, data
    store = read_store(state)
    assert list(store) == ["agent:main:cron:job-1"]
    assert store["agent:main:cron:job-1"]["label"] == "job"


def test_reset_unknown_is_not_found(basic: Path) -> None:
    rc, data = run_json("reset", "agent:main:ghost")
    assert rc == 3 and data["status"] == "error"
    rc, data = run_json("reset", "99999999-9999-4999-8999-999999999999")
    assert rc == 3


# -- delete ----------------------------------------------------------------------------------


def test_delete_archives_transcript_and_leaves_the_list(basic: Path) -> None:
    sid = "22222222-2222-4222-8222-222222222222"
    transcript = sessions_dir(basic) / f"{sid}.jsonl"
    content = transcript.read_bytes()
    rc, data = run_json("delete", "agent:main:dm:alice", env=PINNED)
    assert rc == 0, data
    assert data["sessionKey"] == "agent:main:dm:alice"
    assert data["entry"] is None
    archived = sessions_dir(basic) / f"{sid}.jsonl.deleted.2027-01-15T08-00-00.000Z"
    assert data["archived"] == str(archived)
    assert archived.read_bytes() == content  # renamed, not rewritten
    assert not transcript.exists()
    assert "agent:main:dm:alice" not in read_store(basic)
    rc, listing = run_json("list")
    assert rc == 0
    assert "agent:main:dm:alice" not in [r["key"] for r in listing["sessions"]]
    assert run_cli("history", "agent:main:dm:alice").returncode == 3


def test_delete_by_session_id_without_transcript(basic: Path) -> None:
    proc = run_cli("delete", "33333333-3333-4333-8333-333333333333")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "deleted agent:main:cron:nightly\n"
    assert "agent:main:cron:nightly" not in read_store(basic)
    assert not list(sessions_dir(basic).glob("3333*"))


def test_delete_main_is_refused(basic: Path) -> None:
    before = read_store(basic)
    files = sorted(p.name for p in sessions_dir(basic).iterdir())
    for key in ("main", "agent:main:main"):
        rc, data = run_json("delete", key)
        assert rc == 4, data
        assert data["status"] == "forbidden"
        assert "main session" in data["error"]
    assert read_store(basic) == before
    assert sorted(p.name for p in sessions_dir(basic).iterdir()) == files


def test_delete_unknown_is_not_found(basic: Path) -> None:
    proc = run_cli("delete", "agent:main:never")
    assert proc.returncode == 3
    assert proc.stderr.startswith("sessiontool: error: Session not found: agent:main:never")


def test_delete_twice_keeps_both_archives(basic: Path) -> None:
    """A session deleted, re-created with the same id and deleted again in the same
    millisecond must not overwrite the first archive."""
    sid = "22222222-2222-4222-8222-222222222222"
    assert run_cli("delete", "agent:main:dm:alice", env=PINNED).returncode == 0
    write_store(
        basic, {**read_store(basic), "agent:main:dm:alice": {"sessionId": sid, "updatedAt": NOW}}
    )
    write_transcript(basic, sid, [("user", "again", NOW)])
    assert run_cli("delete", "agent:main:dm:alice", env=PINNED).returncode == 0
    archives = sorted(p.name for p in sessions_dir(basic).glob(f"{sid}.jsonl.deleted.*"))
    assert len(archives) == 2


# -- paths -----------------------------------------------------------------------------------


def test_paths_json(basic: Path) -> None:
    rc, data = run_json("paths")
    assert rc == 0, data
    assert data["stateDir"] == str(basic)
    assert data["runsDir"] == str(basic / "sessiontool" / "runs")
    assert data["outbox"] == str(basic / "sessiontool" / "deliveries.jsonl")
    assert data["configFiles"] == []
    main = next(a for a in data["agents"] if a["id"] == "main")
    assert main["sessionsDir"] == str(sessions_dir(basic))
    assert main["store"] == str(sessions_dir(basic) / "sessions.json")


def test_paths_human_names_config_and_other_state_dir(tmp_path: Path) -> None:
    other = tmp_path / "elsewhere"
    write_store(other, {"agent:ops:main": {"sessionId": "x", "updatedAt": 1}}, agent="ops")
    (other / "sessiontool.json5").write_text("{agents: {list: [{id: 'ops'}]}}")
    proc = run_cli("--state-dir", str(other), "paths")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert re.search(r"^state dir\s+" + re.escape(str(other)) + "$", out, re.M)
    assert str(other / "sessiontool.json5") in out
    assert str(sessions_dir(other, "ops")) in out


# -- prune -----------------------------------------------------------------------------------


def _record(state: Path, run_id: str, **fields: Any) -> Path:
    runs = state / "sessiontool" / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    rec = {
        "runId": run_id,
        "kind": "send",
        "sessionKey": "agent:main:main",
        "agentId": "main",
        **fields,
    }
    p = runs / f"{run_id}.json"
    p.write_text(json.dumps(rec))
    (runs / f"{run_id}.log").write_text("worker log\n")
    return p


@pytest.fixture
def runs_state(basic: Path) -> Path:
    old, new = NOW - 10 * DAY, NOW - DAY
    _record(basic, "old-ok", status="ok", createdAt=old, endedAt=old)
    _record(basic, "old-error", status="error", createdAt=old, endedAt=old + 1000)
    _record(basic, "old-lost", status="lost", createdAt=old)  # no endedAt: createdAt counts
    _record(basic, "new-ok", status="ok", createdAt=old, endedAt=new)  # ended recently
    _record(basic, "old-running", status="running", createdAt=old, workerStartedAt=old)
    # A spawn whose child is still in the index is kept (the archive rule needs it) ...
    _record(
        basic,
        "spawn-live",
        kind="spawn",
        status="ok",
        sessionKey="agent:main:cron:nightly",
        createdAt=old,
        endedAt=old,
    )
    # ... one whose child is gone is not.
    _record(
        basic,
        "spawn-gone",
        kind="spawn",
        status="ok",
        sessionKey="agent:main:subagent:gone",
        createdAt=old,
        endedAt=old,
    )
    outbox = basic / "sessiontool" / "deliveries.jsonl"
    outbox.write_text(
        json.dumps({"ts": "2026-12-01T00:00:00.000Z", "text": "old"})
        + "\n"
        + "this line is not json\n"
        + json.dumps({"ts": "2027-01-15T07:00:00.000Z", "text": "recent"})
        + "\n"
        + json.dumps({"text": "no ts"})
        + "\n"
        + json.dumps({"ts": "2026-12-02T00:00:00.000Z", "text": "old too"})
        + "\n"
    )
    return basic


def _runs_left(state: Path) -> set[str]:
    return {p.name for p in (state / "sessiontool" / "runs").iterdir()}


def test_prune_dry_run_counts_and_changes_nothing(runs_state: Path) -> None:
    before = _runs_left(runs_state)
    outbox = (runs_state / "sessiontool" / "deliveries.jsonl").read_bytes()
    rc, data = run_json("prune", "--older-than", "7d", "--dry-run", env=PINNED)
    assert rc == 0, data
    assert data["deleted"] == {"runs": 4, "logs": 4, "deliveries": 2}
    assert _runs_left(runs_state) == before
    assert (runs_state / "sessiontool" / "deliveries.jsonl").read_bytes() == outbox


def test_prune_deletes_old_finished_runs_logs_and_outbox_lines(runs_state: Path) -> None:
    rc, data = run_json("prune", "--older-than", "7d", env=PINNED)
    assert rc == 0, data
    assert data == {"deleted": {"runs": 4, "logs": 4, "deliveries": 2}}
    left = _runs_left(runs_state)
    for gone in ("old-ok", "old-error", "old-lost", "spawn-gone"):
        assert f"{gone}.json" not in left and f"{gone}.log" not in left
    for kept in ("new-ok", "old-running", "spawn-live"):
        assert f"{kept}.json" in left and f"{kept}.log" in left
    lines = (runs_state / "sessiontool" / "deliveries.jsonl").read_text().splitlines()
    assert lines == [
        "this line is not json",
        json.dumps({"ts": "2027-01-15T07:00:00.000Z", "text": "recent"}),
        json.dumps({"text": "no ts"}),
    ]
    # Nothing is left to prune; the sessions are untouched.
    rc, again = run_json("prune", "--older-than", "7d", env=PINNED)
    assert again["deleted"] == {"runs": 0, "logs": 0, "deliveries": 0}
    assert "agent:main:cron:nightly" in read_store(runs_state)


def test_prune_shorter_age_takes_more(runs_state: Path) -> None:
    proc = run_cli("prune", "--older-than", "10m", env=PINNED)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "deleted 5 run record(s), 5 log(s), 3 outbox line(s)\n"
    assert "old-running.json" in _runs_left(runs_state)


def test_prune_usage_and_refusals(runs_state: Path) -> None:
    assert run_cli("prune").returncode == 2  # --older-than is required
    proc = run_cli("prune", "--older-than", "soon")
    assert proc.returncode == 2 and "--older-than" in proc.stderr
    rc, data = run_json("--as", "main", "prune", "--older-than", "1d")
    assert rc == 4 and data["status"] == "forbidden"
    assert "old-ok.json" in _runs_left(runs_state)


def test_prune_on_an_empty_state_dir(state: Path) -> None:
    rc, data = run_json("prune", "--older-than", "0")
    assert rc == 0
    assert data == {"deleted": {"runs": 0, "logs": 0, "deliveries": 0}}
    assert not state.exists() or not (state / "sessiontool" / "deliveries.jsonl").exists()


# -- output conventions (§1, §10) ------------------------------------------------------------


def test_list_piped_is_tsv_one_key_per_line(basic: Path) -> None:
    cmd = f"{sys.executable} -m sessiontool list | cut -f1"
    proc = subprocess.run(
        cmd, shell=True, capture_output=True, text=True, env=dict(os.environ), timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["agent:main:cron:nightly", "agent:main:dm:alice", "main"]
    raw = run_cli("list").stdout.splitlines()
    assert all(len(line.split("\t")) == 8 for line in raw)
    assert "\x1b" not in "".join(raw)


def _run_in_pty(args: list[str], env: dict[str, str]) -> str:
    """Run the CLI with stdout on a terminal (so it chooses its terminal rendering)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "sessiontool", *args], stdout=slave, stderr=slave, env=env
    )
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 30)
        if not ready:
            break
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=30)
    os.close(master)
    return b"".join(chunks).decode("utf-8", "replace")


def test_no_color_means_no_escape_codes_on_a_terminal(basic: Path) -> None:
    env = dict(os.environ)
    env["NO_COLOR"] = "1"
    env["TERM"] = "xterm-256color"
    for args in (["list"], ["history", "agent:main:dm:alice"], ["doctor"]):
        out = _run_in_pty(args, env)
        assert out.strip(), args
        assert "\x1b" not in out, (args, out)
    table = _run_in_pty(["list"], env)
    assert "KEY" in table and "agent:main:dm:alice" in table  # it did render the table
    # The control: the same terminal does get escape codes when colour is forced.
    forced = _run_in_pty(["--color", "always", "history", "agent:main:dm:alice"], env)
    assert "\x1b[" in forced


def test_history_markdown_to_file(basic: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.md"
    proc = run_cli("history", "main", "--format", "markdown", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    text = out.read_text()
    assert text.startswith("# Session main\n")
    assert re.search(r"^## user — 2027-01-15 07:59:54 UTC$", text, re.M)
    assert "hi" in text
    out2 = tmp_path / "alice.md"
    assert (
        run_cli(
            "history", "--label", "book-club", "--format", "markdown", "-o", str(out2)
        ).returncode
        == 0
    )
    md = out2.read_text()
    headings = re.findall(r"^## (\w+) — (.+)$", md, re.M)
    assert [h[0] for h in headings] == ["user", "assistant"]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", h[1]) for h in headings)
    assert "Middlemarch." in md


@pytest.mark.slow
def test_prune_quiet_and_dry_run_wording(state: Path) -> None:
    assert run_cli("send", "main", "x").returncode == 0
    proc = run_cli("prune", "--older-than", "0", "--dry-run")
    assert "would delete 1 run record(s)" in proc.stdout and "dry run" in proc.stdout
    proc = run_cli("prune", "--older-than", "0", "-q")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    assert run_cli("runs", "-q").stdout == ""
