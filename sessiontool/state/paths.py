"""Every location sessiontool reads or writes, in OpenClaw's layout, and the one guard that keeps
keys, ids and file names from ever naming a path outside the state dir."""

from __future__ import annotations

import os
from pathlib import Path

from sessiontool.errors import UsageError
from sessiontool.state import safefs
from sessiontool.structs import Value

DIR_MODE = 0o700
FILE_MODE = 0o600


def default_state_dir() -> Path:
    from platformdirs import user_state_dir

    return Path(user_state_dir("sessiontool"))


def resolve_state_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """`--state-dir` > SESSIONTOOL_STATE_DIR > the platform's user state dir."""
    if explicit:
        return Path(explicit).expanduser().absolute()
    env = os.environ.get("SESSIONTOOL_STATE_DIR")
    if env:
        return Path(env).expanduser().absolute()
    return default_state_dir()


def is_plain_name(name: str) -> bool:
    """A name usable as one path component: no separators, no `..`, no NUL, not empty."""
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\x00" in name:
        return False
    if name.isascii():  # one byte a character: no encoding needed (100,000 ids in a listing)
        return len(name) <= 255
    try:
        encoded = os.fsencode(name)  # a lone surrogate from a "\\ud800" escape has no file name
    except UnicodeEncodeError:
        return False
    return len(encoded) <= 255


def require_plain_name(name: str, what: str = "session id") -> str:
    if not is_plain_name(name):
        raise UsageError(f"invalid {what}: {name!r} is not a plain name")
    return name


def ensure_dir(path: Path) -> Path:
    """Create a private directory (0700), and each missing parent 0700 too (transcripts are
    private conversations; a state dir readable by others would leak them). Under a state dir
    it must lie inside it once links are followed (safefs: a planted link is refused)."""
    return safefs.ensure_dir(path)


class StatePaths(Value):
    """Where a state dir is, and which store format the command forced on it (`--store`: None
    for auto). The choice travels with the paths, as they are passed down, instead of living in
    a process global: two contexts in one process (the `mcp` server) never see each other's."""

    __slots__ = ("root", "store")

    root: Path
    store: str | None

    def __init__(self, root: Path, store: str | None = None) -> None:
        self.root = root
        self.store = store
        safefs.register_root(root)  # every write under it is confined to it

    @property
    def agents_dir(self) -> Path:
        return self.root / "agents"

    def sessions_dir(self, agent_id: str) -> Path:
        return self.agents_dir / require_plain_name(agent_id, "agent id") / "sessions"

    def sessions_json(self, agent_id: str) -> Path:
        """The agent's store in the JSON era (in the SQLite era a stale pre-migration copy)."""
        return self.sessions_dir(agent_id) / "sessions.json"

    def transcript(self, agent_id: str, session_id: str) -> Path:
        return self.sessions_dir(agent_id) / f"{require_plain_name(session_id)}.jsonl"

    @property
    def tool_dir(self) -> Path:
        return self.root / "sessiontool"

    @property
    def runs_dir(self) -> Path:
        return self.tool_dir / "runs"

    def run_record(self, run_id: str) -> Path:
        return self.runs_dir / f"{require_plain_name(run_id, 'run id')}.json"

    def run_log(self, run_id: str) -> Path:
        return self.runs_dir / f"{require_plain_name(run_id, 'run id')}.log"

    def run_lock(self, run_id: str) -> Path:
        return self.runs_dir / f"{require_plain_name(run_id, 'run id')}.lock"

    @property
    def lanes_dir(self) -> Path:
        return self.tool_dir / "lanes"

    @property
    def deliveries(self) -> Path:
        return self.tool_dir / "deliveries.jsonl"

    @property
    def outbox_successors(self) -> Path:
        return self.tool_dir / ".outbox-successors"

    @property
    def sweep_stamp(self) -> Path:
        return self.tool_dir / "last-sweep"

    @property
    def budget_spend(self) -> Path:
        """The budgets' last spend read, under its transcripts' signatures (reports/spend_cache)."""
        return self.tool_dir / "budget-spend.json"

    @property
    def list_head(self) -> Path:
        """`list`'s first rows of each big store, under its identity (sessions/listhead.py)."""
        return self.tool_dir / "list-head.json"

    def openclaw_config(self) -> Path | None:
        for name in ("openclaw.json", "clawdbot.json"):
            p = self.root / name
            if p.is_file():
                return p
        return None

    @property
    def own_config_default(self) -> Path:
        return self.root / "sessiontool.json5"

    def written_paths(self, deep: bool = False) -> tuple[list[Path], list[Path]]:
        """The directories and files sessiontool writes that a planted link could redirect (for
        safefs.preflight and doctor); `deep` adds every transcript and lock (doctor only)."""
        slots = self.runs_dir / ".slots"
        dirs = [self.agents_dir, self.tool_dir, self.runs_dir, self.lanes_dir, slots]
        dirs.append(self.outbox_successors)
        # The slot files are flocked by every run: a link there would fail them all.
        # `.worker.log`: every background worker's stdout and stderr (runs/spawnproc.py).
        files = [self.deliveries, self.runs_dir / ".records.lock", self.runs_dir / ".worker.log"]
        files += _entries(slots)
        for agent in self.agent_ids_on_disk():
            sdir = self.sessions_dir(agent)
            dirs += [sdir.parent, sdir]
            files.append(sdir / "sessions.json.lock")
            if deep:
                files += _entries(sdir)
        if deep:
            # Each remote gateway's part (`gateways/<hash>/`, its device key in `sessiontool/`):
            # written by every command through that gateway, and by `gateway forget`.
            gateways = self.root / "gateways"
            dirs += [gateways, self.tool_dir / "gateway"]  # the latter: device tokens by URL
            for part in _entries(gateways) if not os.path.islink(gateways) else []:
                dirs += [part] if os.path.islink(part) else [part, part / "sessiontool"]
            files += _entries(self.runs_dir) + _entries(self.lanes_dir)
            lanes = [p for p in _entries(self.lanes_dir) if not p.name.endswith(".lock")]
            dirs += lanes
            for lane in lanes:
                files += _entries(lane) if not os.path.islink(lane) else []
        return dirs, files

    def agent_ids_on_disk(self) -> list[str]:
        """Agents that have a sessions dir, sorted: the stores that exist to be read."""
        try:
            names = os.listdir(self.agents_dir)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(
            n for n in names if is_plain_name(n) and (self.agents_dir / n / "sessions").is_dir()
        )


def _entries(d: Path) -> list[Path]:
    try:
        return [d / n for n in sorted(os.listdir(d))]
    except OSError:
        return []


def transcript_file_for(sessions_dir: str, session_id: str, session_file: object = None) -> str:
    """`transcript_path_for` as a string, without pathlib in the usual forms (no sessionFile,
    or one directly inside the sessions dir): a listing of 100,000 sessions makes one each.
    `session_id` must be a plain name already."""
    if session_file is None:
        return f"{sessions_dir}/{session_id}.jsonl"
    if isinstance(session_file, str):
        head, sep, name = session_file.rpartition("/")
        if sep and head == sessions_dir and is_plain_name(name):
            return f"{sessions_dir}/{name}"
    return os.fspath(transcript_path_for(Path(sessions_dir), session_id, session_file))


def transcript_path_for(sessions_dir: Path, session_id: str, session_file: object = None) -> Path:
    """Where an entry's transcript lives. A sessionFile inside the sessions dir is honoured; one
    pointing elsewhere (an old absolute path from a moved state dir) is reduced to its file name
    inside the sessions dir and never followed."""
    if isinstance(session_file, str) and session_file and "\x00" not in session_file:
        head, sep, name = session_file.rpartition("/")
        if sep and head == os.fspath(sessions_dir) and is_plain_name(name):
            return sessions_dir / name  # the usual form, decided without normalising paths
        candidate = Path(session_file)
        if not candidate.is_absolute():
            candidate = sessions_dir / candidate
        try:
            resolved_parent = Path(os.path.normpath(candidate)).parent
        except ValueError:
            resolved_parent = None
        if resolved_parent is not None and resolved_parent == Path(os.path.normpath(sessions_dir)):
            name = candidate.name
            if is_plain_name(name):
                return sessions_dir / name
        name = candidate.name
        if is_plain_name(name) and (sessions_dir / name).exists():
            return sessions_dir / name
    return sessions_dir / f"{require_plain_name(session_id)}.jsonl"
