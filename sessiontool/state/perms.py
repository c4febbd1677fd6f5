"""The state dir's permissions. Transcripts are private conversations: sessiontool creates its
directories 0700 and its files 0600 (paths.ensure_dir, jsonio.atomic_write, the O_CREAT opens),
and warns when the state dir itself is open to others or owned by someone else, since then
anyone who can write it can read (or plant) sessions and run records.

The check runs on every command, so it is one stat() and nothing when the dir is missing."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sessiontool import diag


def state_dir_problems(root: Path) -> list[str]:
    """What is wrong with the state dir's owner and mode; [] when fine or missing."""
    try:
        st = os.stat(root)
    except OSError:
        return []
    if not stat.S_ISDIR(st.st_mode):
        return []
    problems = []
    euid = os.geteuid()
    if st.st_uid != euid:
        problems.append(
            f"state dir {root} is owned by uid {st.st_uid}, not by you (uid {euid}): "
            "its owner can read and change your sessions"
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o022:
        who = (
            "group- and world-writable"
            if mode & 0o022 == 0o022
            else ("world-writable" if mode & 0o002 else "group-writable")
        )
        problems.append(f"state dir {root} is {who} (mode {mode:04o}); run: chmod 700 {root}")
    return problems


def check_state_dir(root: Path) -> None:
    """Warn (one stderr line each, via diag) about an unsafe state dir; never fails."""
    for problem in state_dir_problems(root):
        diag.warn(problem)
