"""The directory an export writes into (`export --to DIR`, `export --html DIR`): the rules both
exports share, checked before anything is written.

- DIR is named: an empty argument (a cron line's unset `$BACKUP_DIR`) is a usage error, never
  the current directory.
- DIR lies outside the state dir it exports, however it is spelled (a link, `..`).
- Nothing is written through a link: DIR is confined as a state dir is (safefs), so a link
  under DIR leading out of it is refused (exit 5), and an export's own survey refuses a link
  where it writes before it starts.
- A file the export did not write is never replaced: the export names it and stops (exit 2),
  with DIR as it was.
- Temp files of an export that was killed mid-write (`<name>.<pid>.<hex>.tmp`, its pid no
  longer running) are removed by the next export; a live export's are left alone.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from sessiontool.errors import UnsafePathError, UsageError, from_os_error
from sessiontool.state import safefs
from sessiontool.state.jsonio import temp_file_of
from sessiontool.state.locks import pid_alive


def open_dir(dest: str, option: str, state_root: Path) -> Path:
    """DIR as an absolute path, checked (named, outside the state dir, a directory if it
    exists) and confined: every write under it stays under it. `state_root` is the local state
    dir, also when the export reads a remote gateway (target.local_root): its part of the
    state dir is no more a place to export into than the rest."""
    if not dest.strip():
        raise UsageError(
            f"{option} needs a directory; it was given an empty one (an unset variable?)"
        )
    out = Path(dest).expanduser().absolute()
    if safefs.resolves_inside(out, state_root):
        raise UsageError(
            f"{option} {out}: must be outside the state dir it exports ({state_root})",
            extra={"path": str(out)},
        )
    if os.path.lexists(out) and not os.path.isdir(out):
        raise UsageError(f"{option} {out}: not a directory")
    safefs.register_root(out)
    return out


def foreign(path: Path, out_root: Path, what: str) -> UsageError:
    """The refusal of a file in DIR the export did not write (`what` says which kind)."""
    return UsageError(
        f"refusing to replace {path}: {what} export did not write (is {out_root} someone's own"
        " directory?); export to an empty or new DIR",
        extra={"path": str(path)},
    )


def not_ours(path: Path, out_root: Path) -> UsageError:
    """The refusal of a DIR holding a file the export would not write (nothing to replace:
    DIR is simply not an export's own)."""
    return UsageError(
        f"{out_root} holds files the export did not write ({path}); export to an empty or new"
        " DIR (or remove them)",
        extra={"path": str(path)},
    )


def refuse_link(path: Path, out_root: Path, option: str) -> UnsafePathError:
    """The refusal of a link found where an export writes (wherever it leads)."""
    return UnsafePathError(
        f"refusing to write through the link {path} -> {os.path.realpath(path)}: {option} writes"
        f" only plain files and directories under {out_root}; remove the link",
        extra={"path": str(path)},
    )


def survey(
    out_root: Path,
    listed: set[str],
    subdirs: set[str],
    option: str,
    writes: Callable[[str], bool],
) -> None:
    """Check DIR before an export writes into it: every entry is a file the export's own
    record lists (`listed`, relative paths), one of its `subdirs` (each checked the same way),
    or a temp file of one of them; anything else is foreign (UsageError naming it, exit 2:
    "refusing to replace" one of the names the export `writes`, else "DIR holds files the
    export did not write"). A
    link at a listed name or subdir is refused first (UnsafePathError, exit 5), wherever it
    leads. Only when DIR passes are the temp files of dead writers removed (a live one's are
    another export at work). A missing DIR passes."""
    found: list[tuple[str, Path]] = []
    dead: list[Path] = []
    todo = [""]
    while todo:
        rel_dir = todo.pop()
        d = out_root / rel_dir if rel_dir else out_root
        for name in _names(d):
            rel, p = _join(rel_dir, name), d / name
            writer_dead = _temp_of_listed(p, rel_dir, listed)
            if writer_dead is not None:
                if writer_dead:
                    dead.append(p)
                continue
            if (rel in listed or rel in subdirs) and os.path.islink(p):
                raise refuse_link(p, out_root, option)
            if rel in subdirs and os.path.isdir(p):
                todo.append(rel)
            else:
                found.append((rel, p))
    for rel, p in sorted(found):
        if rel not in listed or not os.path.isfile(p):
            raise foreign(p, out_root, "a file the") if writes(rel) else not_ours(p, out_root)
    for p in dead:
        try:
            os.unlink(p)
        except OSError:
            pass


def _join(rel_dir: str, name: str) -> str:
    return f"{rel_dir}/{name}" if rel_dir else name


def _names(d: Path) -> list[str]:
    """The entries of `d`, sorted; none when it does not exist."""
    try:
        return sorted(os.listdir(d))
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise from_os_error(exc, "read") from exc


def _temp_of_listed(p: Path, rel_dir: str, listed: set[str]) -> bool | None:
    """None when `p` is no temp file of a listed name; else whether its writer is dead (and
    it a plain file, which may then be removed)."""
    temp = temp_file_of(p.name)
    if temp is None or _join(rel_dir, temp[0]) not in listed:
        return None
    return not pid_alive(temp[1]) and os.path.isfile(p) and not os.path.islink(p)


def sweep_temps(d: Path, ours: Callable[[str], bool]) -> list[str]:
    """Remove from `d` the temp files of dead writers whose target name `ours` accepts (a
    killed export's). Those of a live pid are another export at work, left alone. The names
    of the files removed."""
    try:
        names = sorted(os.listdir(d))
    except OSError:
        return []
    removed = []
    for name in names:
        parsed = temp_file_of(name)
        if parsed is None or not ours(parsed[0]):
            continue
        if pid_alive(parsed[1]) and parsed[1] != os.getpid():
            continue
        try:
            if not os.path.isfile(d / name) or os.path.islink(d / name):
                continue
            os.unlink(d / name)
        except OSError:
            continue
        removed.append(name)
    return removed
