"""The stat image of a full check: each transcript's stamp (device, inode, size, mtime, ctime)
as the index holds it, in the order the store lists them, kept with the scope's snapshot
(index/snapshots.py), so that the next full check compares 100,000 stats with it in one pass
instead of reading the index's rows back and comparing them one by one (issue 47 item 4: that
read and compare cost more than the stats themselves).

Why a stamp equal to the image means the index holds that file as it is: the image is made of
the stamps the index has for its files (read from its rows, or stats just found equal to them);
the index reads a file again only when its stat differs from its row's, and then the file's
ctime has moved past the image's, which no one can set back; a file that leaves the index drops
every snapshot, the images with them (its id may be reused). A file whose text the image's scope
needs but the index lacks is kept with an impossible stamp: it is always checked. An image
holds for the exact list of paths it was made for (their digest): any other list, and any file
in the index beyond them, checks in full as before."""

from __future__ import annotations

import hashlib
import os
from array import array
from collections.abc import Iterable

WIDTH = 5  # ints per stamp
_NEVER = (-1, -1, -1, -1, -1)  # no file has it: always checked
CHUNK = 256  # stamps compared at once; a differing chunk is compared stamp by stamp


def digest(paths: list[str]) -> bytes:
    """What names the list (a path holds no NUL)."""
    return hashlib.sha256("\0".join(paths).encode("utf-8", "surrogateescape")).digest()


def taken(paths: list[str]) -> array[int] | None:
    """Each path's stamp now, in one array; None when one cannot be stat'ed (gone: a full
    check finds out what to drop) or a number does not fit (a file system with 64-bit inodes
    past 2**63: no image)."""
    flat: list[int] = []
    add = flat.extend
    stat = os.stat
    try:
        for p in paths:
            st = stat(p)
            add((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
        return array("q", flat)
    except (OSError, OverflowError):
        return None


def of_rows(rows: Iterable[tuple[int, int, int, int, int, bool]]) -> array[int] | None:
    """An image from the index's own stamps, in order: (dev, ino, size, mtime, ctime, whether
    the file is indexed as the scope needs it)."""
    flat: list[int] = []
    add = flat.extend
    for dev, ino, size, mtime, ctime, ok in rows:
        add((dev, ino, size, mtime, ctime) if ok else _NEVER)
    try:
        return array("q", flat)
    except OverflowError:
        return None


def differing(now: array[int], kept: array[int]) -> list[int] | None:
    """The positions whose stamp differs (None: the images are not of the same length)."""
    if len(now) != len(kept):
        return None
    if now == kept:
        return []
    out: list[int] = []
    step = CHUNK * WIDTH
    for start in range(0, len(now), step):
        a, b = now[start : start + step], kept[start : start + step]
        if a == b:
            continue
        for i in range(0, len(a), WIDTH):
            if a[i : i + WIDTH] != b[i : i + WIDTH]:
                out.append((start + i) // WIDTH)
    return out


def put(image: array[int], at: int, stamp: tuple[int, int, int, int, int] | None) -> None:
    """Set the stamp at position `at` (None: never equal)."""
    image[at * WIDTH : (at + 1) * WIDTH] = array("q", stamp if stamp is not None else _NEVER)
