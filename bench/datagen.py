"""Synthetic state dirs in OpenClaw's layout, shaped like the real Clawdbot fixtures (entries,
skillsSnapshot, transcript lines copied from them from tests/fixtures)."""

from __future__ import annotations

import copy
import json
import random
import uuid
from pathlib import Path
from typing import Any

from harness import ROOT

FIXTURE = (
    ROOT / "tests" / "fixtures" / "clawdbot-2026.1.24" / "state" / "agents" / "main" / "sessions"
)
BASE_MS = 1_795_292_567_264  # the fixtures' newest updatedAt


def _fixture_store() -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads((FIXTURE / "sessions.json").read_text())
        return data
    except (OSError, ValueError):
        return None


def template_entry() -> dict[str, Any]:
    """A real session entry (agent:main:main of the fixtures), skillsSnapshot included."""
    store = _fixture_store()
    if store and isinstance(store.get("agent:main:main"), dict):
        return copy.deepcopy(store["agent:main:main"])
    # Without the fixtures: the same shape and about the same size (4.6 KB of snapshot).
    skills = ["bluebubbles", "github", "notion", "skill-creator", "slack", "tmux", "weather"]
    resolved = [
        {
            "name": s,
            "description": f"Use the {s} skill for {s} tasks: create, read, update, summarise.",
            "filePath": f"/opt/peers/cb/node_modules/clawdbot/skills/{s}/SKILL.md",
            "baseDir": f"/opt/peers/cb/node_modules/clawdbot/skills/{s}",
            "source": "clawdbot-bundled",
        }
        for s in skills
    ]
    prompt = (
        "\n\nThe following skills provide specialized instructions.\n<available_skills>\n"
        + "".join(
            f"  <skill>\n    <name>{r['name']}</name>\n"
            f"    <description>{r['description']}</description>\n"
            f"    <location>{r['filePath']}</location>\n  </skill>\n"
            for r in resolved
        )
        + "</available_skills>"
    )
    return {
        "sessionId": "5ae11e65-2836-4744-b866-e188c2c7f82c",
        "updatedAt": BASE_MS,
        "deliveryContext": {"channel": "whatsapp"},
        "lastChannel": "whatsapp",
        "channel": "whatsapp",
        "skillsSnapshot": {
            "prompt": prompt,
            "skills": [{"name": s} for s in skills],
            "resolvedSkills": resolved,
            "version": 0,
        },
        "modelProvider": "fake",
        "model": "fake-model",
        "contextTokens": 128000,
        "abortedLastRun": False,
        "inputTokens": 7900,
        "outputTokens": 10,
        "totalTokens": 7900,
    }


_REST = (
    lambda i: f"dm:user-{i}",
    lambda i: f"telegram:group:-{100000 + i}",
    lambda i: f"discord:channel:{900000 + i}",
    lambda i: f"cron:job-{i}",
    lambda i: f"hook:{uuid.UUID(int=i, version=4)}",
    lambda i: f"node-{i}",
    lambda i: f"subagent:{uuid.UUID(int=10**9 + i, version=4)}",
)


def make_entries(agent: str, n: int, *, snapshot: bool, seed: int) -> dict[str, Any]:
    """`n` entries for one agent's store: varied kinds of keys, distinct ids and times."""
    rng = random.Random(seed)
    base = template_entry()
    if not snapshot:
        base.pop("skillsSnapshot", None)
    store: dict[str, Any] = {
        f"agent:{agent}:main": dict(
            base, sessionId=str(uuid.UUID(int=rng.getrandbits(128), version=4))
        )
    }
    for i in range(1, n):
        e = dict(base)
        e["sessionId"] = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        e["updatedAt"] = BASE_MS - rng.randrange(0, 90 * 86_400_000)
        e["totalTokens"] = e["inputTokens"] = rng.randrange(100, 120_000)
        if i % 11 == 0:
            e["label"] = f"label-{i}"
        store[f"agent:{agent}:{_REST[i % len(_REST)](i)}"] = e
    return store


def write_store(root: Path, agent: str, store: dict[str, Any]) -> Path:
    d = root / "agents" / agent / "sessions"
    d.mkdir(parents=True, exist_ok=True)
    p = d / "sessions.json"
    # OpenClaw writes JSON.stringify(store, null, 2).
    p.write_text(json.dumps(store, indent=2, ensure_ascii=False), encoding="utf-8")
    return p


def transcript_lines() -> list[bytes]:
    """Real message lines (user, assistant with usage, tool calls and results)."""
    out: list[bytes] = []
    for name in (
        "72dd6a35-8069-46b2-a993-ad56c4291cda.jsonl",
        "5ae11e65-2836-4744-b866-e188c2c7f82c.jsonl",
    ):
        try:
            for line in (FIXTURE / name).read_bytes().splitlines():
                if b'"type":"message"' in line:
                    out.append(line + b"\n")
        except OSError:
            pass
    if out:
        return out
    for i in range(40):
        role = "user" if i % 2 == 0 else "assistant"
        msg: dict[str, Any] = {
            "role": role,
            "content": [{"type": "text", "text": f"message {i} " + "lorem ipsum " * 20}],
        }
        if role == "assistant":
            msg.update(
                api="openai-completions",
                provider="fake",
                model="fake-model",
                stopReason="stop",
                usage={
                    "input": 5000,
                    "output": 20,
                    "cacheRead": 0,
                    "cacheWrite": 0,
                    "totalTokens": 5020,
                },
            )
        line = {
            "type": "message",
            "id": f"{i:08x}",
            "parentId": None,
            "timestamp": "2026-11-21T20:22:00.000Z",
            "message": msg,
        }
        out.append(json.dumps(line, separators=(",", ":")).encode() + b"\n")
    return out


def write_transcript(path: Path, session_id: str, size: int) -> int:
    """A transcript of about `size` bytes: the header, then real lines repeated (written in
    ~1 MB chunks), ending with one whole copy of the lines, so that transcripts of any size end
    in the same messages. Returns the size written."""
    header = (
        json.dumps(
            {
                "type": "session",
                "version": 3,
                "id": session_id,
                "timestamp": "2026-11-21T20:00:00.000Z",
                "cwd": "/srv",
            },
            separators=(",", ":"),
        ).encode()
        + b"\n"
    )
    lines = transcript_lines()
    block = b"".join(lines)
    chunk = block * max(1, (1 << 20) // len(block))
    room = size - len(block)
    written = 0
    with open(path, "wb") as fh:
        fh.write(header)
        written += len(header)
        while written + len(chunk) <= room:
            fh.write(chunk)
            written += len(chunk)
        i = 0
        while written + len(lines[i % len(lines)]) <= room:  # whole lines up to the size
            fh.write(lines[i % len(lines)])
            written += len(lines[i % len(lines)])
            i += 1
        fh.write(block)
        written += len(block)
    return written
