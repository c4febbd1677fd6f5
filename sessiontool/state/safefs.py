"""Confinement: every file sessiontool creates, appends to or replaces under a state dir stays in
that state dir, whatever links someone planted there.

Two rules, applied by the few primitives below that every writer uses:
- a directory we create or write into must resolve (symlinks followed) to a place inside the
  state dir's real location (the state dir itself may be a symlink: users move it to another
  disk; links inside it that point inside it keep working);
- the file itself is opened with O_NOFOLLOW (or created with O_EXCL, which never follows), so a
  link planted in place of a transcript, the outbox or a lock file is refused, not written
  through.

A refusal is an `UnsafePathError` (exit 5) naming the path. Reads are not confined: a reader
follows links like any program, and reading cannot change anything outside.

The state dirs are known from `StatePaths` (each registers its root); a path under none of them
(a test's scratch file, `history -o` outside the state dir) is only opened without following a
link on its last component.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sessiontool.errors import StorageError, UnsafePathError, from_os_error

DIR_MODE = 0o700
FILE_MODE = 0o600
# The open(2) flags every opener under a state dir uses, spelled once (0 where the platform
# has none): a link planted in place of the file is refused; no child process inherits the fd.
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
CLOEXEC = getattr(os, "O_CLOEXEC", 0)

_ROOTS: set[str] = set()


def register_root(root: Path | str) -> None:
    """Remember a state dir (lexical absolute path) so that writes under it are confined."""
    _ROOTS.add(os.path.normpath(os.path.abspath(root)))


def _root_of(path: Path | str) -> str | None:
    """The registered state dir `path` lies under (lexically), the longest match; None if none."""
    p = os.path.normpath(os.path.abspath(path))
    best: str | None = None
    for r in _ROOTS:
        if (p == r or p.startswith(r.rstrip(os.sep) + os.sep)) and (
            best is None or len(r) > len(best)
        ):
            best = r
    return best


def _inside(real: str, real_root: str) -> bool:
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def resolves_inside(path: Path | str, root: Path | str) -> bool:
    """Whether `path` is `root` or lies under it once links and `..` are resolved (the parts
    that do not exist yet taken as spelled): what an export compares its destination with, so
    that no spelling of DIR (a link, `x/../state`) lands in the state dir it reads."""
    return _inside(os.path.realpath(path), os.path.realpath(root))


def _refuse(path: Path | str, root: str, real: str | None = None) -> UnsafePathError:
    where = f" -> {real}" if real else ""
    return UnsafePathError(
        f"refusing to write through the link {path}{where}: it leads outside the state dir"
        f" {root}; remove it (see `sessiontool doctor`)",
        extra={"path": str(path)},
    )


def _mkdir(d: str) -> None:
    try:
        os.mkdir(d, DIR_MODE)
    except FileExistsError:
        pass
    except OSError as exc:
        raise from_os_error(exc, "create") from exc


def _makedirs_plain(path: str) -> None:
    """Create `path` and missing parents 0700 (outside any state dir: no confinement)."""
    missing = []
    p = path
    while not os.path.lexists(p) and p != os.path.dirname(p):
        missing.append(p)
        p = os.path.dirname(p)
    for d in reversed(missing):
        _mkdir(d)


def ensure_dir(path: Path) -> Path:
    """Create a private directory (0700, missing parents too) and check that it lies inside its
    state dir once links are followed. Raises UnsafePathError for a link leading out,
    StorageError when it cannot be created or a file stands where the directory should be."""
    root = _root_of(path)
    sp = os.path.normpath(os.path.abspath(path))
    if root is None:
        if not os.path.isdir(sp):
            _makedirs_plain(sp)
        if not os.path.isdir(sp):
            raise StorageError(f"cannot create {sp}: a file is in the way", extra={"path": sp})
        return path
    if not os.path.isdir(root):
        _makedirs_plain(root)
    real_root = os.path.realpath(root)
    real = os.path.realpath(sp)
    if _inside(real, real_root) and os.path.isdir(real):
        return path  # the common case: one realpath, no creation
    # Walk down from the state dir, creating what is missing and checking every step.
    cur = root
    rel = os.path.relpath(sp, root)
    for part in [] if rel == "." else rel.split(os.sep):
        cur = os.path.join(cur, part)
        _mkdir(cur)
        try:
            st = os.lstat(cur)
        except OSError as exc:
            raise StorageError(
                f"cannot create {cur}: {exc.strerror or exc}", extra={"path": cur}
            ) from exc
        if stat.S_ISLNK(st.st_mode):
            target = os.path.realpath(cur)
            if not _inside(target, real_root):
                raise _refuse(cur, root, target)
            if not os.path.isdir(target):
                raise StorageError(
                    f"{cur} is a link to {target}, which is not a directory",
                    hint=f"remove it (rm {cur})",
                    extra={"path": cur},
                )
        elif not stat.S_ISDIR(st.st_mode):
            raise StorageError(
                f"{cur} is a file where a directory should be",
                hint=f"move it away (mv {cur} {cur}.bak)",
                extra={"path": cur},
            )
    return path


def check_file(path: Path) -> None:
    """Refuse `path` when it is a link (a planted one leads anywhere); its directory is checked
    by ensure_dir."""
    root = _root_of(path)
    if os.path.islink(path):
        target = os.path.realpath(path)
        raise _refuse(path, root or os.path.dirname(os.path.abspath(path)), target)


def open_write(path: Path, flags: int, mode: int = FILE_MODE) -> int:
    """os.open for writing under the state dir: the directory is created and confined, the last
    component is never followed. OS errors other than a link propagate as OSError, for the
    caller to word."""
    ensure_dir(path.parent)
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as exc:
        # Linux says ELOOP, the BSDs EMLINK; O_EXCL says EEXIST. Whatever: a link is refused.
        if os.path.islink(path):
            check_file(path)
        raise exc


def write_private_file(path: Path, data: bytes) -> None:
    """A user-named output file (`history -o`): created 0600 (an existing regular file is made
    0600 too: it now holds a private transcript). Inside the state dir it is confined like every
    other write; outside, a link is followed (the user named it) and a device such as
    /dev/stdout works. Raises OSError for the caller's funnel."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
    if _root_of(path) is not None:
        fd = open_write(path, flags, FILE_MODE)
    else:
        fd = os.open(path, flags, FILE_MODE)
    try:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) != FILE_MODE:
            os.fchmod(fd, FILE_MODE)
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
    finally:
        os.close(fd)


def check_inside(d: Path, root: Path) -> None:
    """Refuse (UnsafePathError naming the link) when directory `d` under the state dir `root`
    resolves outside it: what a removal checks first (nothing there is created)."""
    real_root = os.path.realpath(root)
    parent = os.path.normpath(os.path.abspath(d))
    if _inside(os.path.realpath(parent), real_root):
        return
    cur = os.path.normpath(os.path.abspath(root))
    rel = os.path.relpath(parent, cur)
    for part in [] if rel == "." else rel.split(os.sep):
        cur = os.path.join(cur, part)
        if os.path.islink(cur) and not _inside(os.path.realpath(cur), real_root):
            raise _refuse(cur, str(root), os.path.realpath(cur))
    raise _refuse(parent, str(root), os.path.realpath(parent))


def remove_file(path: Path, root: Path) -> bool:
    """Unlink a file under the state dir `root` (True when there was one): never through a link
    on the way, so a link planted at a directory above it (`gateways/<hash>`) is refused
    (UnsafePathError naming it) instead of deleting a file wherever it points. A link at
    `path` itself is removed, never its target (unlink does not follow one)."""
    check_inside(path.parent, root)
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise from_os_error(exc, "remove") from exc
    return True


def planted_links(root: Path, dirs: list[Path], files: list[Path]) -> list[tuple[Path, str]]:
    """Which paths sessiontool writes would be refused: a directory that resolves outside the
    state dir, a file that is a link (writes never follow one) or sits in such a directory.
    (path, where it leads) each; a few lstat/realpath calls; missing paths are fine."""
    register_root(root)
    real_root = os.path.realpath(root)
    found: list[tuple[Path, str]] = []
    dirs, files = list(dict.fromkeys(dirs)), list(dict.fromkeys(files))
    for d in dirs:
        if os.path.lexists(d):
            real = os.path.realpath(d)
            if not _inside(real, real_root):
                found.append((d, real))
    for f in files:
        if os.path.islink(f):
            found.append((f, os.path.realpath(f)))
        elif os.path.lexists(f):
            real = os.path.realpath(f)
            if not _inside(real, real_root):
                found.append((f, real))
    return found


def preflight(root: Path, dirs: list[Path], files: list[Path]) -> None:
    """Refuse at once (exit 5, in the foreground) when a path a command is about to write
    through is a planted link, rather than failing later inside a background worker."""
    bad = planted_links(root, dirs, files)
    if bad:
        path, real = bad[0]
        raise _refuse(path, str(root), real)
