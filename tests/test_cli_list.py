"""`sessiontool list` end to end, against a copy of the real Clawdbot state and compared with
what the real sessions_list tool returned for it (minus the documented divergences)."""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_cli, run_json, write_config

from .test_fixtures import FIXTURES, MAX_MAIN_UPDATED, copy_state, expected, main_store

INTERNAL_KINDS = {"cron", "hook", "node"}
# The fields the real tool and sessiontool share verbatim (everything but key, kind, channel,
# displayName and transcriptPath, which differ by design).
SHARED_FIELDS = (
    "sessionId",
    "updatedAt",
    "totalTokens",
    "model",
    "contextTokens",
    "label",
    "thinkingLevel",
    "systemSent",
    "abortedLastRun",
    "lastChannel",
    "deliveryContext",
)


@pytest.fixture(scope="module")
def fx_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One copy of the fixture state for the module: these tests only read it."""
    return copy_state(tmp_path_factory.mktemp("fixture") / "state")


def listing(
    state: Path, *args: str, env: dict[str, str] | None = None, agent: str | None = None
) -> dict[str, Any]:
    """Run `list --json` once per distinct command line (the module's state is read-only), and
    hand each caller its own copy of the result."""
    frozen_env = tuple(sorted((env or {}).items()))
    return copy.deepcopy(_listing(state, args, frozen_env, agent))


@functools.cache
def _listing(
    state: Path, args: tuple[str, ...], env: tuple[tuple[str, str], ...], agent: str | None
) -> dict[str, Any]:
    pre = ("--agent", agent) if agent else ()
    rc, data = run_json("--state-dir", str(state), *pre, "list", *args, env=dict(env))
    assert rc == 0, data
    assert data["count"] == len(data["sessions"])
    return data  # type: ignore[no-any-return]


def ours_key(real_key: str, agent: str = "main") -> str:
    return "main" if real_key == f"agent:{agent}:main" else real_key


def test_default_listing_matches_the_real_tool(fx_state: Path) -> None:
    real = expected("sessions_list.default")
    got = listing(fx_state)
    assert got["count"] == real["count"] == 9  # the bare duplicate is folded into one row
    assert [r["sessionId"] for r in got["sessions"]] == [r["sessionId"] for r in real["sessions"]]
    assert [r["key"] for r in got["sessions"]] == [ours_key(r["key"]) for r in real["sessions"]]
    for g, e in zip(got["sessions"], real["sessions"], strict=True):
        for name in SHARED_FIELDS:
            assert g.get(name) == e.get(name), (e["key"], name)
    updated = [r["updatedAt"] for r in got["sessions"]]
    assert updated == sorted(updated, reverse=True)


def test_main_row_is_shown_as_main(fx_state: Path) -> None:
    rows = listing(fx_state)["sessions"]
    assert rows[0]["key"] == "main" and rows[0]["kind"] == "main"
    assert not any(r["key"] == "agent:main:main" for r in rows)
    # The folded duplicate shows once, under its full key, with the newer entry's data.
    bare = [r for r in rows if r["key"].endswith("hook:bare-one")]
    assert [r["key"] for r in bare] == ["agent:main:hook:bare-one"]
    assert bare[0]["updatedAt"] == main_store()["hook:bare-one"]["updatedAt"]
    assert bare[0]["model"] == "fake-model"  # only the full entry had a model


def test_kinds_and_channels_follow_the_spec(fx_state: Path) -> None:
    """Kinds are classified after removing `agent:<id>:` (divergence: the real tool says
    `other`); cron/hook/node rows are channel `internal`; groups take the entry's channel, else
    the key's segment; main/other take deliveryContext.channel, else lastChannel, else unknown."""
    real = {r["sessionId"]: r for r in expected("sessions_list.default")["sessions"]}
    rows = {r["key"]: r for r in listing(fx_state)["sessions"]}
    assert {k: r["kind"] for k, r in rows.items()} == {
        "main": "main",
        "agent:main:dm:alice": "other",
        "agent:main:telegram:group:-100777": "group",
        "agent:main:discord:channel:987": "group",
        "agent:main:node-pi4": "node",
        "agent:main:hook:3b9e2f47-81c4-4a0d-b6e2-9f1d0c5a7e38": "hook",
        "agent:main:cron:daily-report": "cron",
        "agent:main:hook:bare-one": "hook",
        "agent:main:whatsapp:group:1203@g.us": "group",
    }
    for r in rows.values():
        if r["kind"] in INTERNAL_KINDS:
            assert r["channel"] == "internal"
        else:
            assert r["channel"] == real[r["sessionId"]]["channel"], r["key"]
    assert rows["main"]["channel"] == "whatsapp"  # deliveryContext.channel
    assert rows["agent:main:dm:alice"]["channel"] == "unknown"
    assert rows["agent:main:telegram:group:-100777"]["channel"] == "webchat"  # entry's channel
    assert rows["agent:main:discord:channel:987"]["channel"] == "discord"  # key segment
    assert rows["agent:main:whatsapp:group:1203@g.us"]["channel"] == "whatsapp"


def test_display_name_only_when_the_entry_has_one(fx_state: Path) -> None:
    # Divergence: the real gateway invents `discord:g-987`; no fixture entry has a displayName.
    for r in listing(fx_state)["sessions"]:
        assert "displayName" not in r


def test_transcript_path_is_absolute_and_exists(fx_state: Path) -> None:
    real = {r["sessionId"]: r for r in expected("sessions_list.default")["sessions"]}
    sessions_dir = (fx_state / "agents" / "main" / "sessions").resolve()
    for r in listing(fx_state)["sessions"]:
        p = Path(r["transcriptPath"])
        assert p.is_absolute() and p.is_file(), r
        assert p.resolve().parent == sessions_dir
        assert p.name == real[r["sessionId"]]["transcriptPath"]


def test_outside_session_file_is_reduced_to_its_name(fx_state: Path) -> None:
    """The discord entry's sessionFile is an absolute path under /srv/cbdev (a moved state dir);
    the listed path is the same file name inside this state dir."""
    entry = main_store()["agent:main:discord:channel:987"]
    assert entry["sessionFile"].startswith("/srv/")
    row = next(
        r for r in listing(fx_state)["sessions"] if r["key"] == "agent:main:discord:channel:987"
    )
    assert row["transcriptPath"] == str(
        fx_state / "agents" / "main" / "sessions" / Path(entry["sessionFile"]).name
    )


def test_kinds_group_matches_the_real_tool(fx_state: Path) -> None:
    real = expected("sessions_list.kinds_group")
    got = listing(fx_state, "--kinds", "group")
    assert [r["key"] for r in got["sessions"]] == [r["key"] for r in real["sessions"]]
    for g, e in zip(got["sessions"], real["sessions"], strict=True):
        for name in SHARED_FIELDS:
            assert g.get(name) == e.get(name)


@pytest.mark.parametrize(
    ("kinds", "keys"),
    [
        (["cron"], ["agent:main:cron:daily-report"]),
        (
            ["hook"],
            ["agent:main:hook:3b9e2f47-81c4-4a0d-b6e2-9f1d0c5a7e38", "agent:main:hook:bare-one"],
        ),
        (["node"], ["agent:main:node-pi4"]),
        (["main"], ["main"]),
        (["other"], ["agent:main:dm:alice"]),
        (
            ["cron,hook", "--kinds", "node"],
            [
                "agent:main:node-pi4",
                "agent:main:hook:3b9e2f47-81c4-4a0d-b6e2-9f1d0c5a7e38",
                "agent:main:cron:daily-report",
                "agent:main:hook:bare-one",
            ],
        ),
        (
            ["group,main"],
            [
                "main",
                "agent:main:telegram:group:-100777",
                "agent:main:discord:channel:987",
                "agent:main:whatsapp:group:1203@g.us",
            ],
        ),
    ],
)
def test_kind_filters(fx_state: Path, kinds: list[str], keys: list[str]) -> None:
    got = listing(fx_state, "--kinds", *kinds)
    assert [r["key"] for r in got["sessions"]] == keys


@pytest.mark.parametrize("n", [1, 3])
def test_message_limit_matches_the_real_tool(fx_state: Path, n: int) -> None:
    """Each row gets its last n messages without tool results. Divergence: the real tool counts
    before dropping tool results, so it may return fewer; where it does, its messages are the
    tail of ours."""
    real = expected(f"sessions_list.msg{n}")
    got = listing(fx_state, "--message-limit", str(n))
    assert [r["sessionId"] for r in got["sessions"]] == [r["sessionId"] for r in real["sessions"]]
    equal = 0
    for g, e in zip(got["sessions"], real["sessions"], strict=True):
        ours, theirs = g["messages"], e["messages"]
        assert 0 < len(ours) <= n
        assert all(m["role"] != "toolResult" for m in ours)
        assert len(ours) >= len(theirs)
        assert ours[len(ours) - len(theirs) :] == theirs, g["key"]
        equal += ours == theirs
    assert equal >= 8  # the fixture has tool results only near the ends of a few sessions


def test_message_limit_is_clamped_to_20(fx_state: Path) -> None:
    got = listing(fx_state, "--message-limit", "50", "--kinds", "main,other")
    assert [len(r["messages"]) for r in got["sessions"]] == [20, 20]
    hist = run_json("--state-dir", str(fx_state), "history", "main")[1]
    assert got["sessions"][0]["messages"] == hist["messages"][-20:]


def test_no_messages_key_without_message_limit(fx_state: Path) -> None:
    assert all("messages" not in r for r in listing(fx_state)["sessions"])


def test_limit1_with_messages(fx_state: Path) -> None:
    real = expected("sessions_list.limit1_msg2")
    got = listing(fx_state, "--limit", "1", "--message-limit", "2")
    assert got["count"] == 1
    assert got["sessions"][0]["sessionId"] == real["sessions"][0]["sessionId"]
    assert got["sessions"][0]["messages"] == real["sessions"][0]["messages"]


def test_limit_counts_after_filters(fx_state: Path) -> None:
    """Divergence: `limit3` of the real tool returned 2 rows (it limited across agents first)."""
    assert expected("sessions_list.limit3")["count"] == 2
    full = listing(fx_state)["sessions"]
    got = listing(fx_state, "--limit", "3")
    assert got["sessions"] == full[:3]
    groups = listing(fx_state, "--kinds", "group", "--limit", "2")["sessions"]
    assert [r["key"] for r in groups] == [
        "agent:main:telegram:group:-100777",
        "agent:main:discord:channel:987",
    ]
    every = listing(fx_state, "--limit", "all")
    assert every["sessions"] == listing(fx_state)["sessions"] and "limitApplied" not in every


def test_other_agent_matches_from_research(fx_state: Path) -> None:
    real = expected("sessions_list.from_research")
    got = listing(fx_state, agent="research")
    assert got["count"] == real["count"] == 3
    assert [r["sessionId"] for r in got["sessions"]] == [r["sessionId"] for r in real["sessions"]]
    assert [r["key"] for r in got["sessions"]] == [
        ours_key(r["key"], "research") for r in real["sessions"]
    ]
    for g, e in zip(got["sessions"], real["sessions"], strict=True):
        for name in SHARED_FIELDS:
            assert g.get(name) == e.get(name), (e["key"], name)
    sub = next(r for r in got["sessions"] if "subagent" in r["key"])
    assert sub["kind"] == "other"
    assert Path(sub["transcriptPath"]).parent == fx_state / "agents" / "research" / "sessions"


def test_all_agents(fx_state: Path) -> None:
    got = listing(fx_state, "--all-agents")
    assert got["count"] == 12
    ids = {r["sessionId"] for r in got["sessions"]}
    ids_main = {r["sessionId"] for r in expected("sessions_list.default")["sessions"]}
    ids_research = {r["sessionId"] for r in expected("sessions_list.from_research")["sessions"]}
    assert ids == ids_main | ids_research
    updated = [r["updatedAt"] for r in got["sessions"]]
    assert updated == sorted(updated, reverse=True)
    keys = [r["key"] for r in got["sessions"]]
    # Only the requester agent's main key is shortened.
    assert "main" in keys and "agent:research:main" in keys


def test_active100000_lists_everything(fx_state: Path) -> None:
    real = expected("sessions_list.active100000")
    got = listing(fx_state, "--active-minutes", "100000")
    assert [r["sessionId"] for r in got["sessions"]] == [r["sessionId"] for r in real["sessions"]]


N1 = MAX_MAIN_UPDATED + 77001  # the pinned clock of expected/cli-fixed-now/*.n1.*


def _real_cli_keys(name: str) -> list[str]:
    data = json.loads((FIXTURES / "expected" / "cli-fixed-now" / name).read_text())
    out = []
    for s in data["sessions"]:
        k = s["key"] if s["key"].startswith("agent:") else f"agent:main:{s['key']}"
        k = ours_key(k)
        if k not in out:  # the real CLI shows the bare duplicate twice
            out.append(k)
    return out


@pytest.mark.parametrize("minutes", [1, 2, 5, 30])
def test_active_minutes_with_pinned_clock(fx_state: Path, minutes: int) -> None:
    got = listing(fx_state, "--active-minutes", str(minutes), env={"SESSIONTOOL_NOW_MS": str(N1)})
    assert [r["key"] for r in got["sessions"]] == _real_cli_keys(f"main.n1.active{minutes}.json")
    cutoff = N1 - minutes * 60_000
    assert all(r["updatedAt"] >= cutoff for r in got["sessions"])


def test_active_minutes_edge_is_inclusive_of_the_window(fx_state: Path) -> None:
    # A session updated exactly N minutes ago is still active; one millisecond later it is not.
    env = {"SESSIONTOOL_NOW_MS": str(MAX_MAIN_UPDATED + 60_000)}
    assert listing(fx_state, "--active-minutes", "1", env=env)["sessions"][0]["key"] == "main"
    env = {"SESSIONTOOL_NOW_MS": str(MAX_MAIN_UPDATED + 60_001)}
    assert listing(fx_state, "--active-minutes", "1", env=env)["count"] == 0


def test_since_duration_and_date(fx_state: Path) -> None:
    env = {"SESSIONTOOL_NOW_MS": str(N1)}
    by_active = listing(fx_state, "--active-minutes", "2", env=env)
    assert listing(fx_state, "--since", "2m", env=env) == by_active
    assert listing(fx_state, "--since", "120s", env=env) == by_active
    # An ISO date: everything updated at or after 20:22:30 UTC on the fixture's day.
    got = listing(fx_state, "--since", "2026-11-21T20:22:30Z", env=env)
    assert [r["key"] for r in got["sessions"]] == [
        "main",
        "agent:main:dm:alice",
        "agent:main:telegram:group:-100777",
        "agent:main:discord:channel:987",
    ]
    assert listing(fx_state, "--since", "1d", env=env)["count"] == 9


def test_piped_output_is_tsv_and_quiet_is_keys(fx_state: Path) -> None:
    proc = run_cli("--state-dir", str(fx_state), "list")
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert len(lines) == 9
    first = lines[0].split("\t")
    assert first[:3] == ["main", "main", "whatsapp"]
    assert first[4] == "2026-11-21T20:22:47.264Z"  # the table's order: label is column 4
    assert first[7] == "5ae11e65-2836-4744-b866-e188c2c7f82c"
    assert all(len(line.split("\t")) == 8 for line in lines)
    quiet = run_cli("--state-dir", str(fx_state), "list", "-q")
    assert quiet.stdout.splitlines() == [line.split("\t")[0] for line in lines]


def test_json_is_one_compact_line(fx_state: Path) -> None:
    proc = run_cli("--state-dir", str(fx_state), "list", "--json")
    assert proc.stdout.endswith("\n") and proc.stdout.count("\n") == 1
    assert ", " not in proc.stdout[:200] and '": ' not in proc.stdout
    # --json is also accepted before the command.
    before = run_cli("--state-dir", str(fx_state), "--json", "list")
    assert before.stdout == proc.stdout


def test_reserved_keys_are_never_listed(tmp_path: Path) -> None:
    state = tmp_path / "state"
    d = state / "agents" / "main" / "sessions"
    d.mkdir(parents=True)
    (d / "sessions.json").write_text(
        json.dumps(
            {
                "global": {"sessionId": "g", "updatedAt": 3},
                "unknown": {"sessionId": "u", "updatedAt": 2},
                "agent:main:x": {"sessionId": "x", "updatedAt": 1},
                "agent:main:broken": "not an entry",
            }
        )
    )
    got = listing(state)
    assert [r["key"] for r in got["sessions"]] == ["agent:main:x"]


def test_tokens_fall_back_to_input_plus_output(tmp_path: Path) -> None:
    state = tmp_path / "state"
    d = state / "agents" / "main" / "sessions"
    d.mkdir(parents=True)
    (d / "sessions.json").write_text(
        json.dumps(
            {
                "agent:main:a": {
                    "sessionId": "a",
                    "updatedAt": 2,
                    "inputTokens": 10,
                    "outputTokens": 5,
                },
                "agent:main:b": {"sessionId": "b", "updatedAt": 1},
            }
        )
    )
    rows = listing(state)["sessions"]
    assert rows[0]["totalTokens"] == 15
    assert "totalTokens" not in rows[1]


def test_configured_main_key_and_default_agent(tmp_path: Path) -> None:
    state = tmp_path / "state"
    write_config(
        state,
        {
            "session": {"mainKey": "home"},
            "agents": {"list": [{"id": "ops"}, {"id": "Work", "default": True}]},
        },
    )
    d = state / "agents" / "work" / "sessions"
    d.mkdir(parents=True)
    (d / "sessions.json").write_text(
        json.dumps(
            {
                "agent:work:home": {"sessionId": "h", "updatedAt": 2},
                "agent:work:main": {"sessionId": "m", "updatedAt": 1},
            }
        )
    )
    rows = listing(state)["sessions"]
    assert [(r["key"], r["kind"]) for r in rows] == [("main", "main"), ("agent:work:main", "other")]


def test_legacy_field_names_are_read(tmp_path: Path) -> None:
    state = tmp_path / "state"
    d = state / "agents" / "main" / "sessions"
    d.mkdir(parents=True)
    (d / "sessions.json").write_text(
        json.dumps(
            {
                "cron:old": {"sessionId": "o", "updatedAt": 1},
                "agent:main:dm:bob": {"sessionId": "b", "updatedAt": 2, "lastProvider": "signal"},
                "agent:main:team:group:7": {"sessionId": "t", "updatedAt": 3, "provider": "slack"},
            }
        )
    )
    rows = {r["key"]: r for r in listing(state)["sessions"]}
    assert rows["agent:main:dm:bob"]["channel"] == "signal"
    assert rows["agent:main:dm:bob"]["lastChannel"] == "signal"
    assert rows["agent:main:team:group:7"]["channel"] == "slack"
    assert rows["agent:main:cron:old"]["kind"] == "cron"


def test_tsv_follows_the_table_order_and_fields_picks_columns(fx_state: Path) -> None:
    """`list | cut -f4` is the label, as the table's fourth column; `--fields` picks columns
    (as gh and kubectl users expect), and `--help` documents the order."""
    base = ("--state-dir", str(fx_state))
    rc, data = run_json(*base, "list")
    labelled = {s["key"]: s.get("label") or "" for s in data["sessions"]}
    rows = [ln.split("\t") for ln in run_cli(*base, "list").stdout.splitlines()]
    assert {r[0]: r[3] for r in rows} == labelled
    assert any(labelled.values())
    picked = run_cli(*base, "list", "--fields", "label,key")
    assert picked.returncode == 0, picked.stderr
    assert [ln.split("\t") for ln in picked.stdout.splitlines()] == [[r[3], r[0]] for r in rows]
    rc, slim = run_json(*base, "list", "--fields", "key,kind")
    assert rc == 0 and all(set(s) == {"key", "kind"} for s in slim["sessions"])
    bad = run_cli(*base, "list", "--fields", "key,nope")
    assert bad.returncode == 2 and "unknown field 'nope'" in bad.stderr
    helptext = " ".join(run_cli("list", "--help").stdout.split())
    assert "key, kind, channel, label, updatedAt, model, totalTokens, sessionId" in helptext


def test_list_message_limit_in_text_mode(state: Path) -> None:
    assert run_cli("send", "main", "first words").returncode == 0
    proc = run_cli("list", "--message-limit", "2", "--color", "always")
    assert proc.returncode == 0
    assert "first words" in proc.stdout and "echo: first words" in proc.stdout
    proc = run_cli("list", "--message-limit", "2")  # piped: TSV cannot hold them
    assert proc.returncode == 2 and "--json" in proc.stderr


def test_list_over_sessions_json_folds_nothing_whole(state: Path, monkeypatch: Any) -> None:
    """Issue 47: `list` parses sessions.json once and picks each key's entry as the fold does
    (a bare legacy key and its full form: the newer wins, its legacy fields renamed), without
    folding the whole store; `--kind` and `--limit` as before."""
    from sessiontool.context import build_context
    from sessiontool.sessions.listing import list_sessions
    from sessiontool.state import reader, sessions_json
    from tests.runhelpers import write_store

    store: dict[str, Any] = {
        f"agent:main:dm:u{i:02d}": {"sessionId": f"s-u{i}", "updatedAt": 1000 + i}
        for i in range(30)
    }
    store |= {
        "dm:u05": {"sessionId": "s-old", "updatedAt": 5000, "lastProvider": "telegram"},
        "agent:main:cron:nightly": {"sessionId": "s-cron", "updatedAt": 10},
        "global": {"sessionId": "s-global", "updatedAt": 9999},
    }
    write_store(state, store)
    folded: list[int] = []
    parses: list[Path] = []
    real_fold, real_parse = sessions_json.fold, sessions_json._parse_store

    def fold(s: Any, agent_id: str) -> Any:
        folded.append(len(s))
        return real_fold(s, agent_id)

    def parse(path: Path, text: str | None) -> Any:
        parses.append(path)
        return real_parse(path, text)

    monkeypatch.setattr(sessions_json, "fold", fold)
    monkeypatch.setattr(reader, "fold", fold)
    monkeypatch.setattr(sessions_json, "_parse_store", parse)
    got = list_sessions(build_context(state), limit=3)
    assert [r["sessionId"] for r in got["sessions"]] == ["s-old", "s-u29", "s-u28"]
    assert got["sessions"][0]["key"] == "agent:main:dm:u05"
    assert got["sessions"][0].get("lastChannel") == "telegram"  # `lastProvider`, renamed
    cron = list_sessions(build_context(state), kinds=["cron"], limit=None)
    assert [r["sessionId"] for r in cron["sessions"]] == ["s-cron"]
    assert everything_once(parses)
    assert not folded, folded


def everything_once(parses: list[Path]) -> bool:
    return len(parses) == 2 and len(set(parses)) == 1  # two commands: one parse each
