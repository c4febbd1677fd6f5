"""`export --to` never writes inside the state dir it exports, however DIR is spelled (a link,
`..`), and never replaces a transcript it did not write."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import FIXTURE_STATE, run_cli, run_json
from tests.test_openclaw_sqlite import copy_oc, tree_digest

MAIN_SID = "792f111c-3bb9-4b35-afcd-c0f4605431d4"


@pytest.mark.parametrize("spelling", ["link", "dotdot", "agents-link"])
def test_export_into_openclaws_state_dir_is_refused_however_spelled(
    tmp_path: Path, spelling: str
) -> None:
    state = copy_oc(tmp_path / "state")
    before = tree_digest(state)
    if spelling == "link":
        (tmp_path / "elsewhere").symlink_to(state)
        to = str(tmp_path / "elsewhere")
    elif spelling == "dotdot":
        (tmp_path / "x").mkdir()
        to = str(tmp_path / "x" / ".." / "state" / "agents" / "..")
    else:  # DIR outside, but its agents/ is a link into the state dir's
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "agents").symlink_to(state / "agents")
        to = str(tmp_path / "out")
    proc = run_cli("--state-dir", str(state), "export", "--to", to, "--all-agents")
    assert proc.returncode == 2, proc.stderr
    assert "outside the state dir" in proc.stderr
    assert tree_digest(state) == before
    assert not list(state.glob("agents/*/sessions/*.jsonl"))


def test_a_jsonl_state_dir_exported_onto_itself_through_a_link_is_untouched(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    shutil.copytree(FIXTURE_STATE, state)
    before = tree_digest(state)
    (tmp_path / "moved").symlink_to(state)
    for to in (tmp_path / "moved", tmp_path / "moved" / "agents" / ".." / "."):
        proc = run_cli("--state-dir", str(state), "export", "--to", str(to), "--all-agents")
        assert proc.returncode == 2, proc.stderr
    assert tree_digest(state) == before


def test_a_transcript_export_did_not_write_is_never_replaced(tmp_path: Path) -> None:
    state = copy_oc(tmp_path / "state")
    dest = tmp_path / "dest"
    sessions = dest / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    live = sessions / f"{MAIN_SID}.jsonl"
    head = {"type": "session", "version": 3, "id": MAIN_SID, "timestamp": "2026-01-01", "cwd": "/w"}
    change = {"type": "model_change", "provider": "p", "modelId": "m", "id": "a1b2c3d4-0"}
    live.write_text(json.dumps(head) + "\n" + json.dumps(change) + "\n")
    before = tree_digest(dest)
    proc = run_cli("--state-dir", str(state), "export", "--to", str(dest))
    assert proc.returncode == 2, proc.stderr
    assert str(live) in proc.stderr
    assert tree_digest(dest) == before  # nothing written, not even the other sessions
    # Its own earlier output is updated as before.
    live.unlink()
    assert run_cli("--state-dir", str(state), "export", "--to", str(dest)).returncode == 0
    first = live.read_bytes()
    os.utime(live, (0, 0))
    proc = run_cli("--state-dir", str(state), "export", "--to", str(dest))
    assert proc.returncode == 0, proc.stderr
    assert live.read_bytes() == first


def test_export_html_into_the_state_dir_through_a_link_is_refused(tmp_path: Path) -> None:
    state = copy_oc(tmp_path / "state")
    before = tree_digest(state)
    (tmp_path / "site").symlink_to(state / "agents")
    for to in (tmp_path / "site", tmp_path / "x" / ".." / "state" / "agents"):
        proc = run_cli("--state-dir", str(state), "export", "--html", str(to), "--all-agents")
        assert proc.returncode == 2, proc.stderr
        assert "outside the state dir" in proc.stderr
    assert tree_digest(state) == before


# -- what DIR holds (issue 37, items 1, 2, 4, 12) -------------------------------------------


def _dead_pid() -> int:
    """A pid that is no longer running (a child that exited and was reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.mark.parametrize("mine", ["index.html", "usage.html", "notes.txt", "s/page.html", "sub/"])
def test_export_html_refuses_a_dir_holding_files_it_did_not_write(
    tmp_path: Path, mine: str
) -> None:
    """A user's own index.html (or any file an export's manifest does not list) is named and
    never replaced: exit 2, DIR as it was."""
    state = copy_oc(tmp_path / "state")
    site = tmp_path / "site"
    theirs = site / mine
    theirs.parent.mkdir(parents=True, exist_ok=True)
    if mine.endswith("/"):
        theirs.mkdir()
    else:
        theirs.write_text("<h1>my own page</h1>\n")
    before = tree_digest(site)
    proc = run_cli("--state-dir", str(state), "export", "--html", str(site), "--all-agents")
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.splitlines()[0]
    if mine in ("notes.txt", "sub/"):  # nothing the export would write: not "replace" it
        assert line.startswith(f"sessiontool: error: {site} holds files the export did not write")
        assert str(theirs).rstrip("/") in line and "replace" not in line.split("(")[0]
    else:
        assert line.startswith("sessiontool: error: refusing to replace") and str(theirs) in line
    assert len(proc.stderr.splitlines()) <= 2
    assert tree_digest(site) == before


def test_export_html_reruns_into_its_own_site_and_refuses_a_file_added_to_it(
    tmp_path: Path,
) -> None:
    state = copy_oc(tmp_path / "state")
    site = tmp_path / "site"
    args = ("--state-dir", str(state), "export", "--html", str(site), "--all-agents")
    rc, first = run_json(*args)
    assert rc == 0 and first["written"] == first["pages"], first
    rc, again = run_json(*args)  # its own files, listed by its manifest: a re-run is fine
    assert rc == 0 and again["written"] == 0, again
    for planted in (site / "s" / "extra.html", site / "README"):
        planted.write_text("mine\n")
        before = tree_digest(site)
        proc = run_cli(*args)
        assert proc.returncode == 2 and str(planted) in proc.stderr, proc.stderr
        assert tree_digest(site) == before
        planted.unlink()
    for junk in ("not a manifest", "[" * 5000, '{"format": 1, "pages": []}'):
        (site / ".sessiontool-html.json").write_text(junk)
        proc = run_cli(*args)
        assert proc.returncode == 2 and ".sessiontool-html.json" in proc.stderr, proc.stderr


@pytest.mark.parametrize("where", ["s", "index.html", ".sessiontool-html.json", "s/page"])
def test_export_html_never_writes_through_a_link_in_dir(tmp_path: Path, where: str) -> None:
    """A link at DIR/s (or at any file the export writes) is refused, exit 5 as every other
    writer refuses one, whether it leads outside or not; the tree it points to is untouched."""
    state = copy_oc(tmp_path / "state")
    site = tmp_path / "site"
    args = ("--state-dir", str(state), "export", "--html", str(site), "--all-agents")
    assert run_cli(*args).returncode == 0
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("precious\n")
    if where == "s/page":
        planted = next((site / "s").glob("*.html"))
        planted.unlink()
        planted.symlink_to(victim / "precious.txt")
    else:
        planted = site / where
        if planted.is_dir():
            shutil.rmtree(planted)
        else:
            planted.unlink()
        planted.symlink_to(victim if where == "s" else victim / "precious.txt")
    before = tree_digest(victim)
    proc = run_cli(*args)
    assert proc.returncode == 5, proc.stderr
    line = proc.stderr.splitlines()[0]
    assert line.startswith("sessiontool: error: refusing to write through the link"), line
    assert str(planted) in line
    assert tree_digest(victim) == before
    assert planted.is_symlink()


def test_export_html_into_a_new_dir_whose_s_is_a_link_out_is_refused(tmp_path: Path) -> None:
    state = copy_oc(tmp_path / "state")
    site = tmp_path / "site"
    site.mkdir()
    victim = tmp_path / "victim"
    victim.mkdir()
    (site / "s").symlink_to(victim)
    proc = run_cli("--state-dir", str(state), "export", "--html", str(site), "--all-agents")
    assert proc.returncode == 5, proc.stderr
    assert str(site / "s") in proc.stderr.splitlines()[0]
    assert list(victim.iterdir()) == []
    assert sorted(p.name for p in site.iterdir()) == ["s"]


@pytest.mark.parametrize("option", ["--to", "--html"])
@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_export_dir_is_a_usage_error(tmp_path: Path, option: str, value: str) -> None:
    """A cron line with an unset `$BACKUP_DIR` must not export into the current directory."""
    state = copy_oc(tmp_path / "state")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    proc = run_cli("--state-dir", str(state), "export", option, value, cwd=cwd)
    assert proc.returncode == 2, proc.stderr
    assert f"{option} needs a directory" in proc.stderr and len(proc.stderr.splitlines()) <= 2
    assert list(cwd.iterdir()) == []


@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_history_output_file_is_a_usage_error(tmp_path: Path, value: str) -> None:
    """`history -o "$OUT"` with OUT unset: not exit 5 'cannot write .', nor a file named ' '."""
    state = copy_oc(tmp_path / "state")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    proc = run_cli("--state-dir", str(state), "history", "main", "-o", value, cwd=cwd)
    assert proc.returncode == 2, proc.stderr
    assert "-o needs a file name" in proc.stderr and len(proc.stderr.splitlines()) <= 2
    assert list(cwd.iterdir()) == []


def test_export_to_refuses_a_link_at_a_transcript_or_store_it_writes(tmp_path: Path) -> None:
    state = copy_oc(tmp_path / "state")
    dest = tmp_path / "dest"
    victim = tmp_path / "victim.jsonl"
    victim.write_text("precious\n")
    sessions = dest / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    for planted in (sessions / f"{MAIN_SID}.jsonl", sessions / "sessions.json"):
        planted.symlink_to(victim)
        proc = run_cli("--state-dir", str(state), "export", "--to", str(dest))
        assert proc.returncode == 5, proc.stderr
        assert str(planted) in proc.stderr.splitlines()[0]
        assert victim.read_text() == "precious\n" and planted.is_symlink()
        planted.unlink()


def test_a_killed_export_to_leaves_temp_files_the_next_export_removes(tmp_path: Path) -> None:
    """`<sid>.jsonl.<pid>.<hex>.tmp` of an export that was killed goes with the next export
    (or `doctor --fix` on DIR); a live writer's temp file stays."""
    state = copy_oc(tmp_path / "state")
    dest = tmp_path / "dest"
    args = ("--state-dir", str(state), "export", "--to", str(dest))
    assert run_cli(*args).returncode == 0
    sessions = dest / "agents" / "main" / "sessions"
    dead = _dead_pid()
    leftovers = [
        sessions / f"{MAIN_SID}.jsonl.{dead}.0badf00d.tmp",
        sessions / f"sessions.json.{dead}.0badf00d.tmp",
    ]
    live = sessions / f"{MAIN_SID}.jsonl.{os.getpid()}.0badf00d.tmp"
    theirs = sessions / f"notes.txt.{dead}.0badf00d.tmp"  # not a name export writes
    for p in [*leftovers, live, theirs]:
        p.write_text("half a transcript")
    rc, out = run_json(*args)
    assert rc == 0, out
    assert not any(p.exists() for p in leftovers)
    assert live.exists() and theirs.exists()
    # doctor --fix on the exported state dir removes a dead one too.
    leftovers[0].write_text("half a transcript")
    proc = run_cli("--state-dir", str(dest), "doctor", "--fix")
    assert not leftovers[0].exists(), proc.stdout + proc.stderr
    assert live.exists()


def test_a_killed_export_html_leaves_temp_files_the_next_export_removes(tmp_path: Path) -> None:
    state = copy_oc(tmp_path / "state")
    site = tmp_path / "site"
    args = ("--state-dir", str(state), "export", "--html", str(site), "--all-agents")
    assert run_cli(*args).returncode == 0
    page = next((site / "s").glob("*.html"))
    dead = _dead_pid()
    leftovers = [
        site / f"index.html.{dead}.0badf00d.tmp",
        site / f".sessiontool-html.json.{dead}.0badf00d.tmp",
        page.with_name(f"{page.name}.{dead}.0badf00d.tmp"),
    ]
    live = site / f"usage.html.{os.getpid()}.0badf00d.tmp"
    for p in [*leftovers, live]:
        p.write_text("half a page")
    (site / "README").write_text("mine")  # a refused DIR is left as it was, leftovers too
    assert run_cli(*args).returncode == 2
    assert all(p.exists() for p in leftovers)
    (site / "README").unlink()
    rc, out = run_json(*args)
    assert rc == 0, out
    assert not any(p.exists() for p in leftovers) and live.exists()


def test_a_site_whose_first_export_was_killed_is_taken_up_again(tmp_path: Path) -> None:
    """The manifest lists every page before the first is written: pages of an export killed
    halfway are its own to the next one, not files it refuses to replace."""
    state = copy_oc(tmp_path / "state")
    site = tmp_path / "site"
    args = ("--state-dir", str(state), "export", "--html", str(site), "--all-agents")
    rc, first = run_json(*args)
    assert rc == 0
    # What a kill after the first pages leaves: the early manifest, some pages, no index.
    manifest = json.loads((site / ".sessiontool-html.json").read_text())
    pending = {rel: {"fp": ""} for rel in manifest["pages"]}
    (site / ".sessiontool-html.json").write_text(json.dumps({"format": 1, "pages": pending}))
    (site / "index.html").unlink()
    (site / "usage.html").unlink()
    for page in sorted((site / "s").glob("*.html"))[2:]:
        page.unlink()
    rc, again = run_json(*args)
    assert rc == 0, again
    assert again["sessions"] == first["sessions"] and (site / "index.html").is_file()
    assert json.loads((site / ".sessiontool-html.json").read_text()) == manifest


@pytest.mark.parametrize("where", ["agents", "agents/ops", "agents/ops/sessions"])
def test_export_to_refuses_a_link_out_on_the_way_before_writing_any_agent(
    tmp_path: Path, where: str
) -> None:
    """A link leading out of DIR at `agents/`, an agent's dir or its sessions dir: exit 5 naming
    it, and nothing written for any agent (the other agents' files included)."""
    state = copy_oc(tmp_path / "state")
    dest = tmp_path / "dest"
    victim = tmp_path / "victim"
    victim.mkdir()
    planted = dest / where
    planted.parent.mkdir(parents=True)
    planted.symlink_to(victim)
    proc = run_cli("--state-dir", str(state), "export", "--to", str(dest), "--all-agents")
    assert proc.returncode == 5, proc.stderr
    line = proc.stderr.splitlines()[0]
    assert line.startswith("sessiontool: error: refusing to write through the link"), line
    assert str(planted) in line
    assert list(victim.iterdir()) == []
    assert not (dest / "agents" / "main").exists()


def test_a_remote_export_into_the_local_state_dir_is_refused(state: Path, tmp_path: Path) -> None:
    """`--gateway URL export --to DIR` reads the gateway but keeps its own files in the local
    state dir (`gateways/<key>`): a DIR anywhere in the local state dir is refused as a local
    export's is (exit 2, DIR named), not only one inside that gateway's part; a DIR outside it
    is written."""
    from .fakes import gateway as fake

    secret = "remote-export-token"
    rows = [{"key": "agent:main:good", "agentId": "main", "sessionId": "sid-good", "updatedAt": 1}]
    env = {"OPENCLAW_GATEWAY_TOKEN": secret}
    with fake.running(tmp_path / "gw", token=secret, sessions=rows) as gw:
        url = f"ws://127.0.0.1:{gw.port}"
        refused = []
        for to in (state, state / "backup", state / "gateways"):
            for opt in ("--to", "--html"):
                refused.append(
                    (to, run_cli("--gateway", url, "export", opt, str(to), "--json", env=env))
                )
        ok = run_cli("--gateway", url, "export", "--to", str(tmp_path / "out"), env=env)
    for to, proc in refused:
        assert proc.returncode == 2, (to, proc.stderr)
        err = json.loads(proc.stdout or proc.stderr)
        assert "outside the state dir" in str(err), err
        assert str(to) in str(err), err
        assert not (to / "agents").exists() and not (to / "index.html").exists()
    assert not (state / "backup").exists()
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "out" / "agents" / "main" / "sessions" / "sid-good.jsonl").is_file()
