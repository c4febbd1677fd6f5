"""The real Clawdbot fixtures: helpers the CLI tests share (copy the read-only state, load an
expected output), and checks that reading the copy never changes a byte of it."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import FIXTURE_STATE, FIXTURES, run_cli, run_json

EXPECTED = FIXTURES / "expected" / "tools-invoke"
MAIN_STORE = FIXTURE_STATE / "agents" / "main" / "sessions" / "sessions.json"
RESEARCH_STORE = FIXTURE_STATE / "agents" / "research" / "sessions" / "sessions.json"
# Newest updatedAt in the main store; the real CLI outputs were pinned relative to it.
MAX_MAIN_UPDATED = 1795292567264


def copy_state(dest: Path) -> Path:
    """A writable copy of the fixture state (the original is read-only and must stay so)."""
    shutil.copytree(FIXTURE_STATE, dest)
    for dirpath, dirnames, filenames in os.walk(dest):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            os.chmod(p, os.stat(p).st_mode | stat.S_IWUSR)
    os.chmod(dest, os.stat(dest).st_mode | stat.S_IWUSR)
    return dest


def expected(name: str) -> Any:
    """The `details` of one tools-invoke output (the tool's own JSON result)."""
    body = json.loads((EXPECTED / f"{name}.json").read_text())
    assert body["ok"] is True
    return body["result"]["details"]


def key_file_part(key: str) -> str:
    """How the fixture collector named files after a key (`:` and `@` became `_`)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", key)


def main_store() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(MAIN_STORE.read_text())
    return data


def tree_digest(root: Path) -> dict[str, tuple[str, int]]:
    """Every file under root → (sha256, mode): enough to notice any write, rename or chmod."""
    out: dict[str, tuple[str, int]] = {}
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            p = Path(dirpath) / name
            out[str(p.relative_to(root))] = (
                hashlib.sha256(p.read_bytes()).hexdigest(),
                stat.S_IMODE(p.stat().st_mode),
            )
    return out


@pytest.fixture(scope="module")
def fx_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One copy per module for tests that only read (reads never write; checked below)."""
    return copy_state(tmp_path_factory.mktemp("fixture") / "state")


def test_fixture_layout_is_what_the_tests_assume() -> None:
    store = main_store()
    assert len(store) == 10
    assert "hook:bare-one" in store and "agent:main:hook:bare-one" in store
    assert store["hook:bare-one"]["sessionId"] == store["agent:main:hook:bare-one"]["sessionId"]
    assert max(e["updatedAt"] for e in store.values()) == MAX_MAIN_UPDATED
    assert len(json.loads(RESEARCH_STORE.read_text())) == 3


def test_copy_is_writable_and_equal(tmp_path: Path) -> None:
    copy = copy_state(tmp_path / "state")
    assert tree_digest(copy).keys() == tree_digest(FIXTURE_STATE).keys()
    for rel, (digest, _mode) in tree_digest(FIXTURE_STATE).items():
        assert tree_digest(copy)[rel][0] == digest
    assert os.access(copy / "agents" / "main" / "sessions" / "sessions.json", os.W_OK)


def test_reads_change_nothing_in_the_state_dir(tmp_path: Path) -> None:
    """list and history (every flavour) leave the state dir byte-identical: no lock files, no
    migrations of the bare duplicate key, no new directories."""
    copy = copy_state(tmp_path / "state")
    before = tree_digest(copy)
    dirs_before = sorted(str(p.relative_to(copy)) for p in copy.rglob("*") if p.is_dir())
    sd = ("--state-dir", str(copy))
    for args in (
        ("list",),
        ("list", "--all-agents", "--message-limit", "20"),
        ("list", "--kinds", "group", "--active-minutes", "5"),
        ("history", "main", "--include-tools"),
        ("history", "hook:bare-one"),
        ("history", "ed5f1813-5bfc-4949-8877-9b52151c0848"),
        ("--agent", "research", "history", "agent:research:wipe-me"),
        ("history", "agent:main:nope-not-here"),
    ):
        rc, _ = run_json(*sd, *args)
        assert rc in (0, 3), args
    assert tree_digest(copy) == before
    assert sorted(str(p.relative_to(copy)) for p in copy.rglob("*") if p.is_dir()) == dirs_before


def test_json5_config_of_the_fixture_is_read(fx_state: Path) -> None:
    """The fixture's clawdbot.json has comments and unquoted keys (JSON5); its agents list makes
    `research` a known agent, so `--agent research` sees the research store."""
    proc = run_cli("--state-dir", str(fx_state), "--agent", "research", "list", "-q")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "agent:research:wipe-me"
    assert "main" in proc.stdout.splitlines()
    assert proc.stderr == ""
