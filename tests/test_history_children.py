"""`history` links the sessions spawned from the one it shows (issue 32), as the HTML pages do:
a child names its parent in `spawnedBy` (sessiontool's spawn, OpenClaw's own tool) or only in
`parentSessionKey` (a child made through OpenClaw's gateway), under any agent. Text output ends
with "Spawned KEY" lines; `--json` has a `children` list, only when there are children."""

from __future__ import annotations

from pathlib import Path

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
