"""No write escapes the state dir: a link planted at any path sessiontool writes is refused (or,
for the atomic replaces, replaced itself), and a victim tree outside stays byte for byte the same.
The state dir itself may be a link, and links inside it that point inside it keep working."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from tests.helpers import run_cli
from tests.runhelpers import reap


def tree_digest(root: Path) -> str:
    """Names, kinds, modes, link targets and contents of everything under root."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            p = Path(dirpath) / name
            st = p.lstat()
            h.update(f"{p.relative_to(root)}|{st.st_mode:o}|".encode())
            if p.is_symlink():
                h.update(os.readlink(p).encode())
            elif p.is_file():
                h.update(p.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A state dir with a main session (transcript, store, runs, lanes, outbox, last-sweep)."""
    state = tmp_path_factory.mktemp("template") / "state"
    env = {"SESSIONTOOL_STATE_DIR": str(state)}
    proc = run_cli("send", "main", "hello", "--deliver", env=env)
    assert proc.returncode == 0, proc.stderr
    reap(state)
    return state


def make_victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim"
    (victim / "dir" / "sub").mkdir(parents=True)
    (victim / "existing.txt").write_text("precious\n")
    (victim / "dir" / "keep.jsonl").write_text('{"x":1}\n')
    (victim / "dir" / "sub" / "deep").write_text("deep\n")
    return victim


def main_sid(state: Path) -> str:
    store = json.loads((state / "agents/main/sessions/sessions.json").read_text())
    return str(store["agent:main:main"]["sessionId"])


def main_lane_lock(state: Path) -> str:
    """The lane's sequence file (runs/lanes.py: `lanes/<lane>/.seq`, created on each send)."""
    lanes = sorted(p.name for p in (state / "sessiontool/lanes").iterdir() if p.is_dir())
    assert lanes, "the template has a lane"
    return f"sessiontool/lanes/{lanes[0]}/.seq"


# (where in the state dir, what the link points to in the victim tree). `{sid}` is main's
# sessionId, `{lane}` its lane lock. Targets that do not exist test "create through a link".
PLANTS = [
    ("agents/main/sessions/{sid}.jsonl", "existing.txt"),
    ("agents/main/sessions/{sid}.jsonl", "new-transcript.jsonl"),
    ("sessiontool/deliveries.jsonl", "existing.txt"),
    ("sessiontool/deliveries.jsonl", "new-outbox.jsonl"),
    ("sessiontool", "dir"),
    ("sessiontool/runs", "dir"),
    ("sessiontool/lanes", "dir"),
    ("agents/main/sessions", "dir"),
    ("agents", "dir"),
    ("agents/main/sessions/sessions.json.lock", "new-store-lock"),
    ("agents/main/sessions/{sid}.jsonl.lock", "new-transcript-lock"),
    ("sessiontool/runs/.records.lock", "new-records-lock"),
    ("sessiontool/runs/.worker.log", "existing.txt"),
    ("sessiontool/runs/.worker.log", "new-worker-log"),
    ("{lane}", "new-lane-lock"),
    ("{lane}", "existing.txt"),
    ("{worker}", "new-lane-worker"),
    ("{worker}", "existing.txt"),
    ("agents/main/sessions/sessions.json", "existing.txt"),
    ("sessiontool/last-sweep", "existing.txt"),
]

# The atomic replaces rename over the link itself: the link goes, nothing outside changes.
REPLACED = {"agents/main/sessions/sessions.json", "sessiontool/last-sweep"}


@pytest.mark.parametrize(("where", "target"), PLANTS, ids=[f"{w}->{t}" for w, t in PLANTS])
def test_planted_link_writes_nothing_outside(
    template: Path, tmp_path: Path, where: str, target: str
) -> None:
    state = tmp_path / "state"
    shutil.copytree(template, state, symlinks=True)
    victim = make_victim(tmp_path)
    before = tree_digest(victim)
    lane = main_lane_lock(state) if "{lane}" in where or "{worker}" in where else ""
    rel = where.format(sid=main_sid(state), lane=lane, worker=lane.replace(".seq", ".worker"))
    planted = state / rel
    if planted.is_dir() and not planted.is_symlink():
        shutil.rmtree(planted)
    elif planted.exists() or planted.is_symlink():
        planted.unlink()
    planted.parent.mkdir(parents=True, exist_ok=True)
    planted.symlink_to(victim / target)

    outputs = []
    try:
        # The write paths: a send with a delivery (transcript, store, run record, lane, outbox),
        # a spawn (a new session and transcript, announce), a label (store). Each send also
        # runs the opportunistic sweep (last-sweep).
        outputs.append(run_cli("send", "main", "again", "--deliver", "--timeout", "20"))
        outputs.append(run_cli("spawn", "a task"))
        outputs.append(run_cli("label", "main", "renamed"))
    finally:
        reap(state)
    for proc in outputs:
        assert "Traceback" not in proc.stderr, proc.stderr
        assert proc.returncode in (0, 1, 3, 5), (proc.returncode, proc.stderr)

    assert tree_digest(victim) == before, f"a write through {rel} changed the victim tree"
    if rel not in REPLACED:
        assert planted.is_symlink(), "the planted link is left for the user to look at"
        # Refused where it was found: in the foreground (exit 5, one line naming the link), or
        # by a background worker (the run fails and its log names the link).
        refusals = [p for p in outputs if p.returncode == 5]
        if refusals:
            line = refusals[0].stderr.splitlines()[0]
            assert line.startswith("sessiontool: error: refusing to write through the link")
            assert str(planted) in line, line
        else:
            logs = "".join(
                p.read_text(errors="replace") for p in state.glob("sessiontool/runs/*.log")
            )
            # A link at a lane's `.seq` or `.worker` is refused like any other (issue 37 item
            # 13: they were exit 1, "Too many levels of symbolic links").
            assert f"refusing to write through the link {planted}" in logs, [
                (p.returncode, p.stderr) for p in outputs
            ]


def test_history_output_link_in_state_dir_refused(template: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    shutil.copytree(template, state, symlinks=True)
    victim = make_victim(tmp_path)
    before = tree_digest(victim)
    out = state / "export.md"
    out.symlink_to(victim / "existing.txt")
    proc = run_cli("history", "main", "-o", str(out))
    assert proc.returncode == 5, proc.stderr
    assert str(out) in proc.stderr and len(proc.stderr.splitlines()) <= 2
    assert tree_digest(victim) == before


def test_history_output_is_private(template: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    shutil.copytree(template, state, symlinks=True)
    out = tmp_path / "alice.md"
    old = os.umask(0o022)
    try:
        proc = run_cli("history", "main", "-o", str(out))
    finally:
        os.umask(old)
    assert proc.returncode == 0, proc.stderr
    assert out.stat().st_mode & 0o777 == 0o600
    assert "hello" in out.read_text()
    out.chmod(0o644)  # an existing file now holds a transcript: made private too
    assert run_cli("history", "main", "-o", str(out)).returncode == 0
    assert out.stat().st_mode & 0o777 == 0o600


def test_state_dir_may_be_a_link_and_inner_links_inside_work(
    template: Path, tmp_path: Path
) -> None:
    real = tmp_path / "disk2" / "state"
    real.parent.mkdir()
    shutil.copytree(template, real, symlinks=True)
    link = tmp_path / "state"  # SESSIONTOOL_STATE_DIR points here
    link.symlink_to(real)
    # the runs dir moved inside the state dir and linked back: still inside, still fine
    (real / "sessiontool" / "runs").rename(real / "runs-moved")
    (real / "sessiontool" / "runs").symlink_to(real / "runs-moved")
    try:
        proc = run_cli("send", "main", "via link", "--timeout", "20")
    finally:
        reap(link)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "echo: via link"
    hist = run_cli("history", "main")
    assert "via link" in hist.stdout
    assert list((real / "runs-moved").glob("*.json")), "the run record went through the link"


@pytest.mark.parametrize("which", ["transcript", "lock"])
def test_send_and_spawn_refuse_a_transcript_link_before_starting(
    template: Path, tmp_path: Path, which: str
) -> None:
    """The README: `send` and `spawn` check before starting any background work (exit 5), not
    inside the worker as the run's error (issue 27, item 3)."""
    state = tmp_path / "state"
    shutil.copytree(template, state, symlinks=True)
    victim = make_victim(tmp_path)
    before = tree_digest(victim)
    transcript = state / "agents/main/sessions" / f"{main_sid(state)}.jsonl"
    planted = (
        transcript if which == "transcript" else transcript.with_name(transcript.name + ".lock")
    )
    planted.unlink(missing_ok=True)
    planted.symlink_to(victim / "existing.txt" if which == "transcript" else victim / "new-lock")
    runs_before = sorted((state / "sessiontool/runs").glob("*.json"))
    try:
        outputs = [
            run_cli("send", "main", "again", "--timeout", "20"),
            run_cli("spawn", "a task"),
            run_cli("send", "main", "again", "--timeout", "0"),
        ]
    finally:
        reap(state)
    for proc in outputs:
        assert proc.returncode == 5, (proc.returncode, proc.stderr)
        line = proc.stderr.splitlines()[0]
        assert line.startswith("sessiontool: error: refusing to write through the link"), line
        assert str(planted) in line, line
    assert sorted((state / "sessiontool/runs").glob("*.json")) == runs_before, "a run started"
    assert tree_digest(victim) == before


@pytest.mark.parametrize("command", [["prune", "--older-than", "1s"], ["doctor", "--fix", "--yes"]])
def test_an_outbox_rewrite_refused_by_a_successors_link_leaves_no_temp_file(
    tmp_path: Path, command: list[str]
) -> None:
    """A rewrite of the outbox refused because `.outbox-successors` is a planted link (issue 37,
    item 12): exit 5 naming it, the outbox as it was, and no `deliveries.jsonl.<pid>.<hex>.tmp`
    left beside it."""
    state = tmp_path / "state"
    tool = state / "sessiontool"
    tool.mkdir(parents=True)
    outbox = tool / "deliveries.jsonl"
    lines = b'{"id":"a","ts":1000,"status":"delivered"}\nnot json\n{"id":"b","ts":1000}\n'
    outbox.write_bytes(lines)
    victim = make_victim(tmp_path)
    before = tree_digest(victim)
    (tool / ".outbox-successors").symlink_to(victim / "dir")
    proc = run_cli(*command, env={"SESSIONTOOL_STATE_DIR": str(state)})
    assert "Traceback" not in proc.stderr
    if command[0] == "prune":
        assert proc.returncode == 5, proc.stderr
        assert str(tool / ".outbox-successors") in proc.stderr.splitlines()[0]
    assert outbox.read_bytes() == lines
    assert sorted(p.name for p in tool.iterdir()) == [
        ".deliveries.lock",
        ".outbox-successors",
        "deliveries.jsonl",
    ]
    assert tree_digest(victim) == before


def test_a_worker_log_link_is_refused_before_a_run_is_queued(
    template: Path, tmp_path: Path
) -> None:
    """A link at `runs/.worker.log` (every worker's output): exit 5 with the refusal sentence,
    as every other planted link (it was exit 1 "Too many levels of symbolic links"), and no
    run queued (issue 42, item 13)."""
    state = tmp_path / "state"
    shutil.copytree(template, state, symlinks=True)
    victim = make_victim(tmp_path)
    before = tree_digest(victim)
    planted = state / "sessiontool/runs/.worker.log"
    planted.unlink(missing_ok=True)
    planted.symlink_to(victim / "existing.txt")
    runs_before = sorted((state / "sessiontool/runs").glob("*.json"))
    try:
        proc = run_cli("send", "main", "again", "--timeout", "20")
    finally:
        reap(state)
    assert proc.returncode == 5, (proc.returncode, proc.stderr)
    line = proc.stderr.splitlines()[0]
    assert line.startswith("sessiontool: error: refusing to write through the link"), line
    assert str(planted) in line
    assert sorted((state / "sessiontool/runs").glob("*.json")) == runs_before
    assert tree_digest(victim) == before and planted.is_symlink()


@pytest.mark.parametrize("name", [".seq", ".worker"])
def test_a_lane_link_is_refused_before_a_run_is_queued(
    template: Path, tmp_path: Path, name: str
) -> None:
    """A link at the lane's counter or worker lock: exit 5 naming it (not exit 1 "Too many
    levels of symbolic links"), no run record queued that no worker could take (issue 37,
    item 13)."""
    state = tmp_path / "state"
    shutil.copytree(template, state, symlinks=True)
    victim = make_victim(tmp_path)
    before = tree_digest(victim)
    planted = state / main_lane_lock(state).replace(".seq", name)
    planted.unlink(missing_ok=True)
    planted.symlink_to(victim / "existing.txt")
    runs_before = sorted((state / "sessiontool/runs").glob("*.json"))
    try:
        proc = run_cli("send", "main", "again", "--timeout", "20")
    finally:
        reap(state)
    assert proc.returncode == 5, (proc.returncode, proc.stderr)
    line = proc.stderr.splitlines()[0]
    assert line.startswith("sessiontool: error: refusing to write through the link"), line
    assert str(planted) in line
    assert sorted((state / "sessiontool/runs").glob("*.json")) == runs_before
    assert tree_digest(victim) == before and planted.is_symlink()
