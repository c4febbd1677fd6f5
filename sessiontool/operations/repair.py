"""What `doctor` checks beyond the stores and runs (doctor.py), and what `doctor --fix` may
remove: temp files of writers that died mid-write, lock files of dead pids, and, only with
`--yes`, quarantined records (malformed outbox lines, unreadable run records) and links planted
in the state dir that lead outside it. Never anything a live process may still be using."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sessiontool.state import safefs
from sessiontool.state.locks import pid_alive, read_lock
from sessiontool.state.paths import StatePaths

if TYPE_CHECKING:
    from typing import TypedDict

    from sessiontool.state.config import Config

    class FixResult(TypedDict):
        """What `doctor --fix` did (`fix` in doctor's result): each removal's kind, path and
        action; what waits for `--yes`; what could not be removed, with the error."""

        fixed: list[dict[str, str]]
        needsYes: list[dict[str, str]]
        failed: list[dict[str, str]]


# `<name>.<pid>.<8 hex>.tmp` (jsonio.atomic_write) and `<lock>.<pid>.<8 hex>.stale` (a lock
# moved aside by a breaker).
_LEFTOVER = re.compile(r"^(?P<base>.+)\.(?P<pid>\d+)\.[0-9a-f]{8}\.(?P<kind>tmp|stale)$")


@dataclass(frozen=True)
class Finding:
    kind: str
    path: str
    detail: str
    fix: str  # "safe": --fix removes it; "confirm": --fix --yes; "": nothing to remove
    severity: str = "warning"  # doctor's: "problem" needs attention, "warning" does not

    @property
    def hint(self) -> str | None:
        if self.fix == "safe":
            return "sessiontool doctor --fix"
        if self.fix == "confirm":
            return "sessiontool doctor --fix --yes"
        return None

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "path": self.path, "detail": self.detail}


def _listdir(d: Path) -> list[str]:
    try:
        return sorted(os.listdir(d))
    except OSError:
        return []


def _dirs(paths: StatePaths) -> list[Path]:
    out = [paths.root, paths.tool_dir, paths.runs_dir, paths.lanes_dir]
    out += [paths.sessions_dir(a) for a in paths.agent_ids_on_disk()]
    return out


def _ours(paths: StatePaths, d: Path, base: str, kind: str) -> bool:
    """Whether a leftover's name is one sessiontool makes in that directory: only those are
    ever removed (a user's `notes.2024.abcdef12.tmp` has the same shape)."""
    from sessiontool.state.paths import is_plain_name

    if kind == "stale":  # a lock moved aside by a breaker (locks.PidLock._break)
        return d != paths.runs_dir and (
            base == "sessions.json.lock" or base.endswith(".jsonl.lock")
        )
    if d == paths.tool_dir:
        ours = (paths.deliveries, paths.sweep_stamp, paths.budget_spend, paths.list_head)
        return base in (p.name for p in ours)
    if d == paths.runs_dir:  # records.write_record: `.<runId>.json.<pid>.<hex>.tmp`
        return base.startswith(".") and base.endswith(".json") and is_plain_name(base[1:-5])
    if d != paths.root and d.name == "sessions":
        # a store rewrite (jsonio.atomic_write), a lock's content before its link, or a
        # transcript `export --to` was writing when it was killed
        return (
            base == "sessions.json"
            or base.endswith(".lock")
            or (base.endswith(".jsonl") and is_plain_name(base))
        )
    return False


def leftovers(paths: StatePaths) -> Iterator[Finding]:
    """Temp files of dead writers (a kill mid-write leaves `sessions.json.<pid>.<x>.tmp`, as
    big as the store, forever) and locks moved aside by a breaker that died."""
    for d in _dirs(paths):
        for name in _listdir(d):
            m = _LEFTOVER.match(name)
            if m is None or not _ours(paths, d, m.group("base"), m.group("kind")):
                continue
            p = d / name
            pid = int(m.group("pid"))
            if m.group("kind") == "tmp" and pid_alive(pid) and pid != os.getpid():
                continue  # its writer is still writing it
            try:
                size = p.lstat().st_size
            except OSError:
                continue
            what = "temp file" if m.group("kind") == "tmp" else "lock moved aside"
            yield Finding(
                "temp-file",
                str(p),
                f"{what} of pid {pid}, which is not running ({size} bytes); doctor --fix removes it",
                "safe",
            )


def dead_locks(paths: StatePaths, *, sessions_dirs: bool = True) -> Iterator[Finding]:
    """Lock files (store, transcript, outbox) whose holder pid is not running. Those of the
    sessions dirs are reported by doctor.py as stale locks already."""
    dirs = _dirs(paths) if sessions_dirs else _dirs(paths)[:4]
    for d in dirs:
        for name in _listdir(d):
            if not name.endswith(".lock") or name.startswith("."):
                continue
            p = d / name
            if d == paths.lanes_dir or d == paths.runs_dir or not p.is_file():
                continue  # flock files: empty, held by a live descriptor, never stale
            info = read_lock(p)
            pid = info.get("pid") if info else None
            if isinstance(pid, int) and not isinstance(pid, bool) and not pid_alive(pid):
                yield Finding(
                    "dead-lock",
                    str(p),
                    f"held by pid {pid}, which is not running; doctor --fix removes it",
                    "safe",
                )


def bad_outbox_lines(paths: StatePaths) -> Iterator[Finding]:
    try:
        data = paths.deliveries.read_bytes()
    except OSError:
        return
    bad = [n for n, raw in _outbox_lines(data) if _bad_line(raw)]
    if bad:
        yield Finding(
            "bad-outbox-lines",
            str(paths.deliveries),
            f"{len(bad)} malformed line(s), first at line {bad[0]}; readers skip them; "
            "doctor --fix --yes removes them",
            "confirm",
        )


def _outbox_lines(data: bytes) -> list[tuple[int, bytes]]:
    """Complete lines with their numbers (the unterminated last line is an append in
    progress, never judged)."""
    body, sep, _partial = data.rpartition(b"\n")
    if not sep:
        return []
    return list(enumerate(body.split(b"\n"), start=1))


def _bad_line(raw: bytes) -> bool:
    if not raw.strip():
        return False
    try:
        return not isinstance(json.loads(raw), dict)
    except (ValueError, RecursionError):
        return True


def unreadable_runs(paths: StatePaths) -> Iterator[Finding]:
    """Run records the one schema (runs/schema.py) refuses: every reader skips them, so only
    `--yes` removes them (with their log)."""
    from sessiontool.runs.records import bad_records

    for p, why in bad_records(paths):
        yield Finding(
            "quarantined-run",
            str(p),
            f"not a usable run record ({why}); doctor --fix --yes removes it (and its log)",
            "confirm",
        )


def planted_links(paths: StatePaths) -> Iterator[Finding]:
    """Links where sessiontool writes. Only one leading outside the state dir is planted (and
    removed with --yes); one leading inside may be the only path to a transcript a user moved,
    so it is reported, never removed."""
    dirs, files = paths.written_paths(deep=True)
    real_root = os.path.realpath(paths.root)
    for p, real in safefs.planted_links(paths.root, dirs, files):
        if real == real_root or real.startswith(real_root + os.sep):
            yield Finding(
                "inside-link",
                str(p),
                f"a link to {real} (inside the state dir) where sessiontool writes: writes "
                "through it are refused; replace the link with the file it points to",
                "",
            )
            continue
        yield Finding(
            kind="planted-link",
            path=str(p),
            detail=f"a link to {real} (outside the state dir) where sessiontool writes: writes "
            "through it are refused; doctor --fix --yes removes the link (never its target)",
            fix="confirm",
            severity="problem",
        )


def config_problems(config: Config) -> Iterator[Finding]:
    """Values of the config that are skipped (OpenClaw's file) or refused (sessiontool's)."""
    import functools

    from sessiontool.errors import ConfigError

    for name, attr in sorted(vars(type(config)).items()):
        if isinstance(attr, property | functools.cached_property):
            try:
                getattr(config, name)
            except ConfigError as exc:
                yield Finding(
                    kind="bad-config", path="config", detail=exc.message, fix="", severity="problem"
                )
            except Exception:  # noqa: BLE001 - a property that needs arguments or state
                continue
    for e in config.errors:  # doctor's lenient load: what every other command refuses
        yield Finding(kind="bad-config", path="config", detail=e, fix="", severity="problem")
    for w in [*config.warnings, *config.skipped]:
        yield Finding("config-warning", "config", w, "")


def check(paths: StatePaths, config: Config) -> list[Finding]:
    """doctor's extra findings (doctor.py reports stores, transcripts, session locks and
    run records itself)."""
    out: list[Finding] = []
    for gen in (
        leftovers(paths),
        dead_locks(paths, sessions_dirs=False),
        bad_outbox_lines(paths),
        planted_links(paths),
        config_problems(config),
    ):
        out.extend(gen)
    return out


def _fixable(paths: StatePaths) -> list[Finding]:
    out: list[Finding] = []
    for gen in (
        leftovers(paths),
        dead_locks(paths),
        bad_outbox_lines(paths),
        unreadable_runs(paths),
        planted_links(paths),
    ):
        out.extend(gen)
    return out


def _remove(path: Path) -> str | None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def _break_dead_lock(path: Path) -> str | None:
    """Move the lock aside first and check the moved file: if its holder is alive after all
    (re-taken between look and rename), put it back (the PidLock breaker's protocol)."""
    aside = path.with_name(f"{path.name}.{os.getpid()}.{os.urandom(4).hex()}.stale")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return exc.strerror or str(exc)
    info = read_lock(aside)
    pid = info.get("pid") if info else None
    if isinstance(pid, int) and pid_alive(pid):
        try:
            os.link(aside, path)
        except OSError:
            pass
    return _remove(aside)


def _drop_bad_outbox_lines(paths: StatePaths) -> str | None:
    from sessiontool.flow.delivery import outbox_lock, rewrite_outbox

    with outbox_lock(paths):
        try:
            data = paths.deliveries.read_bytes()
        except OSError as exc:
            return exc.strerror or str(exc)
        body, sep, partial = data.rpartition(b"\n")
        if not sep:
            return None
        kept = [raw + b"\n" for raw in body.split(b"\n") if not _bad_line(raw)]
        rewrite_outbox(paths, b"".join(kept) + partial)
    return None


def fix(paths: StatePaths, config: Config, *, yes: bool) -> FixResult:
    """Remove what is safe; quarantined records and planted links only with `yes`. Returns
    what was done, what was left for `--yes`, and what could not be removed."""
    done: list[dict[str, str]] = []
    left: list[dict[str, str]] = []
    failed: list[dict[str, str]] = []
    for f in _fixable(paths):
        if not f.fix:
            continue
        if f.fix == "confirm" and not yes:
            left.append(f.to_json())
            continue
        p = Path(f.path)
        if f.kind == "dead-lock":
            error, action = _break_dead_lock(p), "removed stale lock"
        elif f.kind == "bad-outbox-lines":
            error, action = _drop_bad_outbox_lines(paths), "removed malformed outbox lines from"
        elif f.kind == "quarantined-run":
            error, action = _remove(p), "removed unreadable run record"
            _remove(p.with_suffix(".log"))
        elif f.kind == "planted-link":
            error, action = _remove(p), "removed planted link"
        else:
            error, action = _remove(p), "removed temp file"
        entry = {"kind": f.kind, "path": f.path, "action": action}
        if error:
            failed.append({**entry, "error": error})
        else:
            done.append(entry)
    return {"fixed": done, "needsYes": left, "failed": failed}
