"""OpenClaw's lock-file protocol, shared by the sessions.json lock and the transcript lock.

A lock is a file made with O_CREAT|O_EXCL holding `{"pid": ..., <stamp>: ...}`. OpenClaw takes the
same files, so both programs can write one live state dir. The stamps are what OpenClaw writes: the
store lock's `startedAt` in epoch ms, the transcript lock's `createdAt` as an ISO-8601 string
(Clawdbot 2026.1 treats a transcript lock whose `createdAt` is not a string as stale and removes it
at once; seen in tests/interop). Both forms are accepted when reading. Staleness differs: a store
lock is held for milliseconds, a transcript lock may be held by OpenClaw for a whole agent run.
Liveness comes from the holder, not the clock: a lock whose pid is a live process on this host
is never broken, however old (the foreground gives up busy, exit 75); a dead pid makes it stale
at once. OpenClaw's age rules (store lock 30 s; no readable pid: 30 s / 30 min) apply only where
the pid cannot be checked: no pid, or a lock naming another host.
"""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from sessiontool.clock import iso, parse_iso_ms
from sessiontool.errors import BusyError, StorageError
from sessiontool.state import safefs

POLL_SECONDS = 0.025


def wall_ms() -> int:
    """The real time, never the pinned SESSIONTOOL_NOW_MS: lock stamps and ages are compared
    with other processes' (OpenClaw's included), so they must all read the same clock."""
    return int(time.time() * 1000)


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OverflowError:
        return False
    # A zombie is dead for our purpose: it can never release the lock.
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        state = stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3]
        if state == b"Z":
            return False
    except (OSError, ValueError):
        pass
    return True


def process_starttime(pid: int) -> int | None:
    """A process's start time in clock ticks since boot (`/proc/<pid>/stat` field 22), or None
    off Linux or when it cannot be read. OpenClaw 2026.2+ stores it in its locks as
    `starttime`: a live pid whose start time differs is a recycled pid, and its lock is stale."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        fields = stat[stat.rindex(b")") + 2 :].split()
        return int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def other_host(info: dict[str, Any] | None) -> bool:
    """Whether a lock names a host that is not this one (`hostname` or `host`)."""
    if not info:
        return False
    for k in ("hostname", "host"):
        v = info.get(k)
        if isinstance(v, str) and v:
            import socket  # only for a lock naming a host: keeps it off the read path

            return v != socket.gethostname()
    return False


def read_lock(path: Path) -> dict[str, Any] | None:
    try:
        with open(path, "rb") as fh:
            data = json.loads(fh.read(4096))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _stamp_ms(info: dict[str, Any] | None, keys: tuple[str, ...]) -> int | None:
    if not info:
        return None
    for k in keys:
        v = info.get(k)
        if isinstance(v, int | float) and not isinstance(v, bool):
            return int(v)
        if isinstance(v, str):
            ms = parse_iso_ms(v)
            if ms is not None:
                return ms
    return None


class PidLock:
    """An exclusive-create lock file with OpenClaw's content and staleness rules."""

    def __init__(
        self,
        path: Path,
        *,
        timeout: float,
        stamp_key: str,
        stale_ms: int | None,
        no_pid_stale_ms: int,
        what: str = "lock",
        iso_stamp: bool = False,
        starttime: bool = False,
    ) -> None:
        self.path = path
        self.timeout = timeout
        self.stamp_key = stamp_key
        self.stale_ms = stale_ms
        self.no_pid_stale_ms = no_pid_stale_ms
        self.what = what
        self.iso_stamp = iso_stamp
        self.starttime = starttime
        self._token: dict[str, Any] | None = None
        # Pids of dead holders whose lock this one broke: what they were writing is abandoned.
        self.dead_holders: list[int] = []
        # `<name>.<pid>.<8 hex>.tmp` beside the lock (jsonio.atomic_write) of a dead holder is
        # removed once the lock is ours: a writer killed mid-write leaves a temp file as big
        # as the store, and nobody else would ever remove it.
        self.temp_of: str | None = None

    def _is_stale(self) -> bool:
        info = read_lock(self.path)
        pid = info.get("pid") if info else None
        stamp = _stamp_ms(info, (self.stamp_key, "startedAt", "createdAt"))
        if stamp is None:
            try:
                stamp = int(self.path.stat().st_mtime * 1000)
            except FileNotFoundError:
                return False
        age = wall_ms() - stamp
        if isinstance(pid, int) and not isinstance(pid, bool):
            if other_host(info):
                # A pid of another machine says nothing here: OpenClaw's age rule decides.
                return self.stale_ms is not None and age > self.stale_ms
            # A live holder on this host is never broken, however old (it may be stopped
            # with Ctrl-Z): breaking it would let its write overwrite ours. Dead: stale now.
            if not pid_alive(pid):
                return True
            # OpenClaw 2026.2+ records the holder's start time: another start time under the
            # same pid is a recycled pid, whose lock nobody holds.
            started = info.get("starttime") if info else None
            if isinstance(started, int) and not isinstance(started, bool) and started >= 0:
                now_started = process_starttime(pid)
                return now_started is not None and now_started != started
            return False
        # No readable pid: its creator may not have written it yet; go by age alone.
        try:
            mtime_age = time.time() * 1000 - self.path.stat().st_mtime * 1000
        except FileNotFoundError:
            return False
        return min(age, mtime_age) > self.no_pid_stale_ms

    def clear_if_stale(self) -> None:
        """Remove the lock file when its holder is gone: a holder killed with -9 leaves its lock,
        and a session nobody writes again would keep it for good."""
        if os.path.lexists(self.path) and self._is_stale():
            self._break()

    def _break(self) -> None:
        # Rename first so that two breakers never both remove a lock a third process re-took.
        tag = f"{os.getpid()}.{os.urandom(4).hex()}"
        aside = self.path.with_name(f"{self.path.name}.{tag}.stale")
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return
        # If what we moved aside turns out to be fresh (re-taken between check and rename), put it
        # back when the name is still free; otherwise it was stale and goes.
        if not self._is_stale_file(aside):
            try:
                os.link(aside, self.path)
            except OSError:
                pass
        else:
            info = read_lock(aside)
            pid = info.get("pid") if info else None
            if isinstance(pid, int) and not isinstance(pid, bool) and not other_host(info):
                self.dead_holders += [] if pid_alive(pid) else [pid]
        try:
            os.unlink(aside)
        except FileNotFoundError:
            pass

    def _is_stale_file(self, path: Path) -> bool:
        saved = self.path
        self.path = path
        try:
            return self._is_stale()
        finally:
            self.path = saved

    def _token_now(self) -> dict[str, Any]:
        stamp_ms = wall_ms()
        token: dict[str, Any] = {
            "pid": os.getpid(),
            self.stamp_key: iso(stamp_ms) if self.iso_stamp else stamp_ms,
        }
        if self.starttime:
            started = process_starttime(os.getpid())
            if started is not None:
                token["starttime"] = started
        return token

    def _create(self, payload: bytes) -> bool:
        """Make the lock file with its content in one step: written under a temp name, then
        hard-linked to the lock's name (which fails if it exists). A holder killed between
        an exclusive create and its write would leave an empty lock, which nobody can tell
        from one being written and so must wait out by age (30 min for a transcript)."""
        if os.path.lexists(self.path):  # held: no temp file for every look of a waiter
            if os.path.islink(self.path):
                safefs.check_file(self.path)  # a planted link: refused, never waited for
            return False
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
        try:  # the temp file goes whatever happens (a signal included) once it may exist
            try:
                fd = safefs.open_write(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except OSError as exc:
                raise StorageError(f"cannot create lock {self.path}: {exc.strerror}") from exc
            try:
                os.write(fd, payload)
            finally:
                os.close(fd)
            os.link(tmp, self.path)
        except FileExistsError:
            if os.path.islink(self.path):
                safefs.check_file(self.path)
            return False
        except OSError as exc:
            if exc.errno in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS, errno.EXDEV):
                return self._create_in_place(payload)  # a file system without hard links
            raise StorageError(f"cannot create lock {self.path}: {exc.strerror}") from exc
        finally:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return True

    def _create_in_place(self, payload: bytes) -> bool:
        try:
            fd = safefs.open_write(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return False
        except OSError as exc:
            raise StorageError(f"cannot create lock {self.path}: {exc.strerror}") from exc
        try:
            os.write(fd, payload)
        except OSError as exc:
            os.close(fd)
            try:
                os.unlink(self.path)
            except OSError:
                pass
            raise StorageError(f"cannot write lock {self.path}: {exc.strerror}") from exc
        os.close(fd)
        return True

    def try_acquire(self) -> bool:
        token = self._token_now()
        if not self._create(json.dumps(token).encode()):
            if self._is_stale():
                self._break()
            return False
        self._token = token
        if self.dead_holders and self.temp_of:
            self._remove_dead_temps()
        return True

    def _remove_dead_temps(self) -> None:
        import re

        dead, self.dead_holders = set(self.dead_holders), []
        pattern = re.compile(re.escape(self.temp_of or "") + r"\.(\d+)\.[0-9a-f]{8}\.tmp")
        d = self.path.parent
        try:
            names = os.listdir(d)
        except OSError:
            return
        for name in names:
            m = pattern.fullmatch(name)
            if m is not None and int(m.group(1)) in dead and not pid_alive(int(m.group(1))):
                try:
                    os.unlink(d / name)
                except OSError:
                    pass

    def acquire(self) -> PidLock:
        deadline = time.monotonic() + self.timeout
        while True:
            if self.try_acquire():
                return self
            if time.monotonic() >= deadline:
                raise BusyError(
                    f"{self.what} is busy: {self.path}",
                    hint="another process holds it; try again",
                )
            time.sleep(POLL_SECONDS)

    def release(self) -> None:
        token, self._token = self._token, None
        if token is None:
            return
        info = read_lock(self.path)
        if info is not None and (
            info.get("pid") != token["pid"] or info.get(self.stamp_key) != token[self.stamp_key]
        ):
            return  # someone broke ours and re-took it; theirs now
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            if exc.errno not in (errno.ENOENT,):
                raise

    def __enter__(self) -> PidLock:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


STORE_LOCK_STALE_MS = 30_000
TRANSCRIPT_NO_PID_STALE_MS = 30 * 60_000
FOREGROUND_TIMEOUT = 10.0
BACKGROUND_TIMEOUT = 60.0


def lock_timeout() -> float:
    """Foreground commands give up after 10 s; the background worker keeps trying for 60 s."""
    if os.environ.get("SESSIONTOOL_WORKER") == "1":
        return BACKGROUND_TIMEOUT
    env = os.environ.get("SESSIONTOOL_LOCK_TIMEOUT")
    if env:
        try:
            return float(env)
        except ValueError:
            pass
    return FOREGROUND_TIMEOUT


# The store lock's payload, by the OpenClaw that shares the state dir (gateway.lock_form):
# "startedAt" — `{"pid", "startedAt": <epoch ms>}`, OpenClaw/Clawdbot 2026.1 (sessiontool's
# reference), and the form used when no gateway's version is known;
# "createdAt" — `{"pid", "createdAt": <ISO-8601>, "starttime": <clock ticks>}`, OpenClaw 2026.2
# to 2026.4.29, whose store lock is its session write lock: it reads a lock without a string
# `createdAt` as invalid (stale once its mtime is 30 s old) and one whose `starttime` differs
# from the live pid's as a recycled pid.
STORE_LOCK_FORMS = ("startedAt", "createdAt")


def store_lock(store_path: Path, timeout: float | None = None, form: str = "startedAt") -> PidLock:
    created = form == "createdAt"
    lock = PidLock(
        store_path.with_name(store_path.name + ".lock"),
        timeout=lock_timeout() if timeout is None else timeout,
        stamp_key="createdAt" if created else "startedAt",
        iso_stamp=created,
        starttime=created,
        stale_ms=STORE_LOCK_STALE_MS,
        no_pid_stale_ms=STORE_LOCK_STALE_MS,
        what="session store lock",
    )
    lock.temp_of = store_path.name
    return lock


def transcript_lock(transcript: Path, timeout: float | None = None) -> PidLock:
    return PidLock(
        transcript.with_name(transcript.name + ".lock"),
        timeout=lock_timeout() if timeout is None else timeout,
        stamp_key="createdAt",
        iso_stamp=True,  # OpenClaw's session-write-lock reads createdAt as a date string
        stale_ms=None,
        no_pid_stale_ms=TRANSCRIPT_NO_PID_STALE_MS,
        what="transcript lock",
    )
