"""`history` links the sessions spawned from the one it shows (issue 32), as the HTML pages do:
a child names its parent in `spawnedBy` (sessiontool's spawn, OpenClaw's own tool) or only in
`parentSessionKey` (a child made through OpenClaw's gateway), under any agent. Text output ends
with "Spawned KEY" lines; `--json` has a `children` list, only when there are children."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.helpers import run_cli, run_json
from tests.runhelpers import write_store, write_transcript

T0 = 1_800_000_000_000


def _family(state: Path) -> None:
    write_transcript(state, "s-main", [("user", "start two children", T0)])
    write_transcript(state, "s-kid", [("user", "a task", T0 + 1)])
    write_store(
        state,
        {
            "agent:main:main": {"sessionId": "s-main", "updatedAt": T0},
            "agent:main:subagent:b-own": {
                "sessionId": "s-kid",
                "updatedAt": T0 + 1,
                "spawnedBy": "agent:main:main",
            },
            "agent:main:subagent:c-other": {
                "sessionId": "s-other",
                "updatedAt": T0 + 2,
                "spawnedBy": "agent:main:elsewhere",
            },
        },
    )
    write_store(  # a child under another agent, made through a gateway: parentSessionKey only
        state,
        {"agent:ops:subagent:a-gw": {"sessionId": "s-gw", "parentSessionKey": "agent:main:main"}},
        agent="ops",
    )


def test_history_names_the_children_in_text_and_json(state: Path) -> None:
    _family(state)
    proc = run_cli("history", "main")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.endswith(
        "start two children\n\nSpawned agent:main:subagent:b-own\nSpawned agent:ops:subagent:a-gw\n"
    ), proc.stdout
    rc, data = run_json("history", "main")
    assert rc == 0
    assert data["children"] == ["agent:main:subagent:b-own", "agent:ops:subagent:a-gw"], data
    assert [m["role"] for m in data["messages"]] == ["user"]


def test_a_session_without_children_has_no_footer_and_no_key(state: Path) -> None:
    _family(state)
    rc, data = run_json("history", "subagent:b-own")
    assert rc == 0 and "children" not in data, data
    proc = run_cli("history", "subagent:b-own")
    assert proc.returncode == 0 and "Spawned" not in proc.stdout, proc.stdout
    # Other formats stay as they were: a Markdown export names no children.
    md = run_cli("history", "main", "--format", "markdown")
    assert md.returncode == 0 and "Spawned" not in md.stdout, md.stdout


def test_history_parses_each_store_once_and_folds_only_the_children(
    state: Path, monkeypatch: Any
) -> None:
    """Issue 47: `history KEY` at 100,000 sessions is one parse of each store; the children are
    the entries with a parent field, folded alone (no fold of the whole store). A bare legacy
    key whose newer full form names no parent is no child (the fold's rule)."""
    from sessiontool.context import build_context
    from sessiontool.sessions.history import history, spawned_from
    from sessiontool.sessions.reading import read_scope
    from sessiontool.state import reader, sessions_json

    _family(state)
    store = {f"agent:main:dm:u{i}": {"sessionId": f"s-u{i}", "updatedAt": T0} for i in range(50)}
    store |= {
        "agent:main:main": {"sessionId": "s-main", "updatedAt": T0},
        "agent:main:subagent:b-own": {"sessionId": "s-kid", "spawnedBy": "agent:main:main"},
        "subagent:d-old": {"sessionId": "s-d", "updatedAt": 1, "spawnedBy": "agent:main:main"},
        "agent:main:subagent:d-old": {"sessionId": "s-d", "updatedAt": 2},
    }
    write_store(state, store)
    parses: list[Path] = []
    folded: list[int] = []
    real_parse, real_fold = sessions_json._parse_store, sessions_json.fold

    def parse(path: Path, text: str | None) -> Any:
        parses.append(path)
        return real_parse(path, text)

    def fold(store: Any, agent_id: str) -> Any:
        folded.append(len(store))
        return real_fold(store, agent_id)

    monkeypatch.setattr(sessions_json, "_parse_store", parse)
    monkeypatch.setattr(sessions_json, "fold", fold)
    monkeypatch.setattr(reader, "fold", fold)
    ctx = build_context(state)
    with read_scope():
        h = history(ctx, "main", limit=20)
        children = spawned_from(ctx, h.resolved.key)
    assert children == ["agent:main:subagent:b-own", "agent:ops:subagent:a-gw"]
    assert sorted(p.parent.parent.name for p in parses) == ["main", "ops"]
    assert max(folded) <= 2, folded  # one session's stored forms at a time
