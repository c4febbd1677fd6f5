"""A running run's steering inbox: `send --mode steer` (OpenClaw's `sessions_send` `mode:
"steer"`) puts guidance here, and a runner that can take guidance between its model calls (the
`openai` and `llm` runners) takes it before its next call, as a user message of the run.

`<state>/sessiontool/steer/<runId>.jsonl`, one JSON object a line, under its own flock. When the
run's agent is done the worker closes the inbox (`close`): what no model call took is handed back
to be queued as a turn of its own, and a later steer finds it closed and is queued instead, so
guidance is never lost between the last model call and the run's end."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessiontool.state.flock import held

if TYPE_CHECKING:
    from sessiontool.runs.record_types import RunRecord
    from sessiontool.state.config import Config
    from sessiontool.state.paths import StatePaths

# The runner types that take guidance between model calls (runs/runners/).
STEERABLE_RUNNERS = frozenset({"openai", "llm"})


def _inbox(root: Path, run_id: str) -> Path:
    return root / "sessiontool" / "steer" / f"{run_id}.jsonl"


def _closed(root: Path, run_id: str) -> Path:
    return root / "sessiontool" / "steer" / f"{run_id}.closed"


def _lock(root: Path, run_id: str) -> Path:
    return root / "sessiontool" / "steer" / f"{run_id}.lock"


def _read(path: Path) -> list[dict[str, Any]]:
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    out = []
    for line in raw.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and isinstance(item.get("text"), str):
            out.append(item)
    return out


def offer(root: Path, run_id: str, item: dict[str, Any]) -> bool:
    """Put guidance (`text`, `provenance`) in a run's inbox; False when the run's agent is
    already done (the caller queues a turn instead)."""
    with held(_lock(root, run_id), "the steering inbox"):
        if _closed(root, run_id).exists():
            return False
        with open(_inbox(root, run_id), "a", encoding="utf-8") as f:
            f.write(json.dumps(item, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
    return True


def take(root: Path, run_id: str) -> list[dict[str, Any]]:
    """The guidance waiting for a run (each item once): what a runner adds before its next
    model call."""
    path = _inbox(root, run_id)
    if not path.exists():
        return []
    with held(_lock(root, run_id), "the steering inbox"):
        items = _read(path)
        path.unlink(missing_ok=True)
    return items


def take_from_env(env: dict[str, str]) -> list[dict[str, Any]]:
    """`take` for the run a runner was started for (its SESSIONTOOL_STATE_DIR and RUN_ID)."""
    root, run_id = env.get("SESSIONTOOL_STATE_DIR"), env.get("SESSIONTOOL_RUN_ID")
    if not root or not run_id:
        return []
    return take(Path(root), run_id)


def close(root: Path, run_id: str) -> list[dict[str, Any]]:
    """The run's agent is done: no more guidance is taken; what was left untaken."""
    with held(_lock(root, run_id), "the steering inbox"):
        left = _read(_inbox(root, run_id))
        _inbox(root, run_id).unlink(missing_ok=True)
        _closed(root, run_id).touch()
    return left


def user_message(item: dict[str, Any]) -> dict[str, Any]:
    """The transcript's user message for one piece of guidance."""
    from sessiontool.clock import now_ms

    msg: dict[str, Any] = {
        "role": "user",
        "content": [{"type": "text", "text": item["text"]}],
        "timestamp": now_ms(),
    }
    if isinstance(item.get("provenance"), dict):
        msg["provenance"] = item["provenance"]
    return msg


def requeue_left(paths: StatePaths, cfg: Config, rec: RunRecord) -> list[str]:
    """After a run's agent is done (runs/execute.py): its inbox closed, and each piece of
    guidance no model call took queued as a follow-up turn of its own in the same session
    (the lane's worker runs it next). The new runs' ids."""
    from sessiontool.runs import records
    from sessiontool.state import keys

    agent_id = str(rec.get("agentId") or keys.agent_of(rec["sessionKey"]))
    if cfg.runner_for(agent_id).get("type") not in STEERABLE_RUNNERS:
        return []
    made = []
    for item in close(paths.root, rec["runId"]):
        prov = item.get("provenance") if isinstance(item.get("provenance"), dict) else None
        source = (prov or {}).get("sourceSessionKey")
        new = records.create_record(
            paths,
            kind="send",
            sessionKey=rec["sessionKey"],
            agentId=agent_id,
            requesterSessionKey=source if isinstance(source, str) else None,
            message=item["text"],
            provenance=prov,
            timeoutSeconds=0,
        )
        made.append(new["runId"])
    return made
