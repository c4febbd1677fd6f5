"""Announce delivery (spec §7): where a reply would be posted, the outbox line that always
records the attempt, the optional delivery command, and the transcript mirror.

OpenClaw posts announces to chat channels; sessiontool has none, so the outbox
(`<state>/sessiontool/deliveries.jsonl`) is the channel and an operator-configured command may
forward records to a real one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from sessiontool.clock import iso_now, now_ms, parse_iso_ms
from sessiontool.errors import SessiontoolError, StorageError
from sessiontool.flow import policy
from sessiontool.state import keys
from sessiontool.state.config import Config
from sessiontool.state.jsonio import compact_utf8
from sessiontool.state.paths import (
    FILE_MODE,
    StatePaths,
    is_plain_name,
    transcript_path_for,
)
from sessiontool.state.safefs import NOFOLLOW
from sessiontool.state.sessions_json import read_entry
from sessiontool.state.transcript import append_message

if TYPE_CHECKING:
    from sessiontool.flow.result_types import DeliveryRecord

Mode = Literal["announce", "deliver", "spawn-announce"]
MODES: tuple[str, ...] = ("announce", "deliver", "spawn-announce")

DELIVERED = "delivered"
# No delivery command is configured: the line is in the outbox for a bridge to pick up
# (`deliveries --follow`), and nothing was sent anywhere. Never "delivered".
OUTBOX = "outbox"
LANDED = (DELIVERED, OUTBOX)  # what counts as done: nothing to retry
UNDELIVERED = "undelivered"
FAILED = "failed"
DENIED = "denied"

COMMAND_TIMEOUT_SECONDS = 30.0
STDERR_TAIL_CHARS = 500
FOLLOW_POLL_SECONDS = 0.2

Target = tuple[str | None, str | None, str | None]


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def resolve_target(full_key: str, entry: Mapping[str, Any] | None) -> Target:
    """(channel, to, accountId) to post to. The group or channel a key names wins, because a
    group entry's own routing fields often point at the gateway's internal channel; otherwise
    where the session was last reached (deliveryContext, field by field falling back to
    lastChannel / lastTo / lastAccountId). Values may be partial; a target needs channel and to."""
    e = entry or {}
    dc = e.get("deliveryContext")
    dcm: Mapping[str, Any] = dc if isinstance(dc, Mapping) else {}
    ctx_channel = _text(dcm.get("channel")) or _text(e.get("lastChannel"))
    account = _text(dcm.get("accountId")) or _text(e.get("lastAccountId"))
    group = keys.key_group_target(full_key)
    if group is not None:
        channel, to = group
        # The account only means something on the same channel as the key's.
        same = ctx_channel is not None and ctx_channel.lower() == channel
        return channel, to, account if same else None
    to_ = _text(dcm.get("to")) or _text(e.get("lastTo"))
    return ctx_channel, to_, account


def has_target(target: Target) -> bool:
    return bool(target[0]) and bool(target[1])


def _read_entry(paths: StatePaths, agent_id: str, full_key: str) -> dict[str, Any] | None:
    return read_entry(paths, full_key, agent_id)


def mirror_message(text: str, ts_ms: int | None = None, *, outbox: bool = False) -> dict[str, Any]:
    """The assistant message OpenClaw writes after posting to a channel. Its api / provider /
    model marks are what make OpenClaw keep the mirror out of the model's context, so they
    must be exactly these. `outbox`: nothing was posted (no delivery command), which the
    mirror says (`deliveryStatus`), so the views never call it delivered."""
    extra = {"deliveryStatus": OUTBOX} if outbox else {}
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "api": "openai-responses",
        "provider": "openclaw",
        "model": "delivery-mirror",
        "usage": {
            "input": 0,
            "output": 0,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": 0,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
        },
        "stopReason": "stop",
        "timestamp": now_ms() if ts_ms is None else ts_ms,
        **extra,
    }


def _tail(data: bytes) -> str:
    text = data.decode("utf-8", "replace").strip()
    return text[-STDERR_TAIL_CHARS:]


def run_delivery_command(
    command: list[str], record: Mapping[str, Any], env: Mapping[str, str] | None = None
) -> str | None:
    """Hand the record to the operator's command on stdin. None when it exited 0, else the
    reason. Its own process group, so a timeout kills whatever it started too."""
    payload = compact_utf8(dict(record)) + b"\n"
    try:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
            env=env,
        )
    except OSError as exc:
        return f"cannot run delivery command {command[0]!r}: {exc.strerror or exc}"
    try:
        _, err = proc.communicate(payload, timeout=COMMAND_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.communicate()
        return f"delivery command timed out after {COMMAND_TIMEOUT_SECONDS:g}s"
    except BaseException:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.wait()
        raise
    if proc.returncode == 0:
        return None
    tail = _tail(err)
    reason = f"delivery command exited with status {proc.returncode}"
    return f"{reason}: {tail}" if tail else reason


@contextmanager
def outbox_lock(paths: StatePaths) -> Iterator[None]:
    """The one lock every outbox writer takes: appenders and prune's rewrite. A flock, so a
    killed holder never blocks anyone and a live one is simply waited for."""
    from sessiontool.state.flock import held

    with held(paths.tool_dir / ".deliveries.lock", str(paths.deliveries), FILE_MODE):
        yield


def append_outbox(paths: StatePaths, record: Mapping[str, Any]) -> bool:
    """One line, one os.write on an O_APPEND descriptor, under the outbox lock (prune's rewrite
    takes it too, so no line is lost to it). A record with an `id` already in the outbox is not
    written again (False). A torn last line gets its newline first, so ours stays whole."""
    with outbox_lock(paths):
        rid = record.get("id")
        if isinstance(rid, str) and rid in _ids(paths):
            return False
        try:
            fd = os.open(
                paths.deliveries, os.O_RDWR | os.O_APPEND | os.O_CREAT | NOFOLLOW, FILE_MODE
            )
        except OSError as exc:
            raise StorageError(f"cannot open {paths.deliveries}: {exc.strerror}") from exc
        try:
            start = os.fstat(fd).st_size
            prefix = b"\n" if start and os.pread(fd, 1, start - 1) != b"\n" else b""
            data = prefix + compact_utf8(dict(record)) + b"\n"
            try:
                written = os.write(fd, data)
                while written < len(data):  # only on a nearly full disk
                    written += os.write(fd, data[written:])
            except OSError:
                # Never leave half a line: cut back to where this append started.
                try:
                    os.ftruncate(fd, start)
                except OSError:
                    pass
                raise
        except OSError as exc:
            raise StorageError(f"cannot append to {paths.deliveries}: {exc.strerror}") from exc
        finally:
            os.close(fd)
    return True


def rewrite_outbox(paths: StatePaths, data: bytes) -> None:
    """Replace the outbox with `data` (what prune or doctor --fix keeps); the caller holds
    outbox_lock. Followers are told which file replaced which (flow/follow.py), so a follower
    that missed a rewrite still reads every line the files in between received."""
    from sessiontool.flow.follow import link_successor
    from sessiontool.state.jsonio import atomic_write

    def link(new: Path) -> None:
        try:
            link_successor(paths.outbox_successors, paths.deliveries, new)
        except OSError as exc:
            raise StorageError(
                f"cannot record the outbox's successor in {paths.outbox_successors}: "
                f"{exc.strerror or exc}"
            ) from exc

    atomic_write(paths.deliveries, data, before_rename=link)


def _ids(paths: StatePaths) -> set[str]:
    """Delivery ids already in the outbox (only read when a delivery is being resumed)."""
    try:
        data = paths.deliveries.read_bytes()
    except FileNotFoundError:
        return set()
    except OSError as exc:
        raise StorageError(f"cannot read {paths.deliveries}: {exc.strerror}") from exc
    if b'"id"' not in data:
        return set()
    out = set()
    for raw in data.split(b"\n"):
        if b'"id"' in raw:
            rec = _parse_record(raw)
            if rec is not None and isinstance(rec.get("id"), str):
                out.add(rec["id"])
    return out


def _mirror(
    paths: StatePaths,
    agent_id: str,
    entry: Mapping[str, Any] | None,
    message: dict[str, Any],
    *,
    resume: bool = False,
) -> bool:
    """Append the mirror (`message`, mirror_message's) to the target's transcript; False when the session has no entry or
    no usable sessionId (nothing to mirror into). A resumed delivery first looks whether the
    mirror is already there, so it is never appended twice."""
    if entry is None:
        return False
    sid = entry.get("sessionId")
    if not isinstance(sid, str) or not is_plain_name(sid):
        return False
    path = transcript_path_for(paths.sessions_dir(agent_id), sid, entry.get("sessionFile"))
    if resume:
        from sessiontool.state.transcript import read_tail

        text = message["content"][0]["text"]

        def same(m: dict[str, Any]) -> bool:
            c = m.get("content")
            return (
                m.get("model") == "delivery-mirror"
                and isinstance(c, list)
                and bool(c)
                and isinstance(c[0], dict)
                and c[0].get("text") == text
            )

        if read_tail(path, 1, same).messages:
            return True
    append_message(path, sid, message)
    return True


def deliver(
    paths: StatePaths,
    config: Config,
    *,
    run_id: str,
    session_key: str,
    mode: Mode,
    text: str,
    mirror: bool = True,
    agent_id: str | None = None,
    delivery_id: str | None = None,
    resume: bool = False,
    retry_of: str | None = None,
) -> DeliveryRecord:
    """Deliver `text` to the channel of the session `session_key` (full form) and return the
    outbox record. The delivery command gets the delivery's id (`delivery_id`, or `retry_of`
    for a retry, whose new line carries no id) in its input and as SESSIONTOOL_DELIVERY_ID:
    a worker killed mid-delivery runs it again, and a bridge de-duplicates on that id.
    Exactly one outbox line is written whatever happens (with `delivery_id`, one
    line with that id however often it is resumed: `resume` first looks for it); the send policy of the
    target is checked first (`denied`), then the target (`undelivered`), then the delivery
    command (`failed` on a non-zero exit; none: `outbox`, for a bridge). Only those mirror.

    A mirror that cannot be written does not undo the delivery: the returned record (not the
    outbox line) then carries `mirrorError`. `agent_id` is only needed for the key `global`."""
    if mode not in MODES:
        raise ValueError(f"unknown delivery mode {mode!r}")
    agent = agent_id or keys.agent_of(session_key)
    record: DeliveryRecord = {"id": delivery_id} if delivery_id else {}
    if resume and delivery_id and delivery_id in _ids(paths):
        mirrored = text if mirror else None
        return _resumed(paths, delivery_id, agent=agent, key=session_key, mirrored=mirrored)
    record.update(
        {
            "ts": iso_now(),
            "runId": run_id,
            "sessionKey": session_key,
            "mode": mode,
            "channel": None,
            "to": None,
            "accountId": None,
            "text": text,
            "status": FAILED,
        }
    )
    entry: dict[str, Any] | None = None
    try:
        entry = _read_entry(paths, agent, session_key)
        decision = policy.send_decision(config.send_policy, session_key, entry)
        channel, to, account = resolve_target(session_key, entry)
        record.update({"channel": channel, "to": to, "accountId": account})
        command = config.delivery_command
    except SessiontoolError as exc:
        # An unreadable store or config: we cannot tell whether delivery is allowed, so it
        # is not attempted, and the outbox says why.
        record["error"] = exc.message
        append_outbox(paths, record)
        return record
    if not decision.allowed:
        record["status"] = DENIED
        record["error"] = f"send blocked by session policy ({decision.decided_by})"
    elif not has_target((record["channel"], record["to"], None)):
        record["status"] = UNDELIVERED
        record["error"] = (
            "no delivery target: the key names no group or channel, and the session has no "
            "deliveryContext or lastChannel/lastTo"
        )
    elif command:
        _by_command(config, command, record, delivery_id or retry_of)
    else:
        record["status"] = OUTBOX
    append_outbox(paths, record)
    if record["status"] in LANDED and mirror:
        try:
            made = mirror_message(text, outbox=record["status"] == OUTBOX)
            _mirror(paths, agent, entry, made, resume=resume)
        except SessiontoolError as exc:
            return {**record, "mirrorError": exc.message}
    return record


def _resumed(
    paths: StatePaths, delivery_id: str, *, agent: str, key: str, mirrored: str | None
) -> DeliveryRecord:
    """A resumed delivery whose line is already in the outbox: that line (the one this very
    delivery wrote before its worker was killed), its mirror written again (`mirrored`, the
    text; None: no mirror) where it had landed."""
    empty: DeliveryRecord = {}
    done = next((r for r in read_deliveries(paths) if r.get("id") == delivery_id), empty)
    if done.get("status") in LANDED and mirrored is not None:
        entry = _read_entry(paths, agent, key)
        again = mirror_message(mirrored, outbox=done["status"] == OUTBOX)
        _mirror(paths, agent, entry, again, resume=True)
    return done


def _by_command(
    config: Config, command: list[str], record: DeliveryRecord, bridge_id: str | None
) -> None:
    """Hand the record to the delivery command: `delivered` when it exits 0, else `failed`
    with its error (set in `record`). The command gets the delivery's id (`bridge_id`) in its
    input and as SESSIONTOOL_DELIVERY_ID, to de-duplicate a delivery its worker ran again."""
    from sessiontool import childenv

    sent = {k: v for k, v in record.items() if k not in ("status", "error")}
    env = childenv.for_config(
        os.environ, config.get("sessiontool.delivery"), "sessiontool.delivery"
    )
    # The worker's own marker is not the command's: a nested sessiontool is a foreground
    # command (10 s lock waits, not the worker's 60 s).
    env.pop("SESSIONTOOL_WORKER", None)
    if bridge_id:
        sent["id"] = bridge_id
        env["SESSIONTOOL_DELIVERY_ID"] = bridge_id
    failure = run_delivery_command(command, sent, env)
    if failure is None:
        record["status"] = DELIVERED
    else:
        record["error"] = failure


# -- reading the outbox ------------------------------------------------------------------------


def _parse_record(raw: bytes) -> DeliveryRecord | None:
    """One outbox line as a record: its keys are those `deliver` writes, each value as the line
    holds it (any version of sessiontool, or a person, may have written the file: a reader
    checks the type of a value it relies on, as `redeliver.delivery_id` does)."""
    if not raw.strip():
        return None
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return cast("DeliveryRecord", obj) if isinstance(obj, dict) else None


def _after(record: Mapping[str, Any], since_ms: int | None) -> bool:
    if since_ms is None:
        return True
    ts = record.get("ts")
    ms = parse_iso_ms(ts) if isinstance(ts, str) else None
    return ms is not None and ms >= since_ms


def read_deliveries(paths: StatePaths, since_ms: int | None = None) -> list[DeliveryRecord]:
    """Every outbox record in file order (oldest first), those at or after `since_ms` when
    given. Unparsable lines (a torn write) are skipped: the outbox is a log, not a database."""
    try:
        data = paths.deliveries.read_bytes()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return []
    except OSError as exc:
        raise StorageError(f"cannot read {paths.deliveries}: {exc.strerror}") from exc
    out: list[DeliveryRecord] = []
    lines = data.split(b"\n")
    bad = 0
    for n, raw in enumerate(lines, start=1):
        rec = _parse_record(raw)
        if rec is None:
            bad += bool(raw.strip()) and n < len(lines)  # the unterminated last: in progress
        elif _after(rec, since_ms):
            out.append(rec)
    if bad:
        from sessiontool import diag

        diag.warn(
            f"{paths.deliveries}: {bad} malformed line(s) skipped "
            "(`sessiontool doctor` reports them, `doctor --fix --yes` removes them)"
        )
    return out


def follow_deliveries(
    paths: StatePaths,
    since_ms: int | None = None,
    *,
    last: int | None = None,
    poll: float = FOLLOW_POLL_SECONDS,
) -> Iterator[DeliveryRecord]:
    """Records as they are appended, like `tail -f`, forever. The records already in the
    outbox come first: those since `since_ms`, the last `last` of them (both None: none, and
    following starts at the current end). A missing outbox is waited for; one replaced by
    `prune` or `doctor --fix` is followed into the new file without losing or repeating a line
    (flow/follow.py)."""
    from sessiontool.flow.follow import follow_lines

    lines = follow_lines(
        paths.deliveries,
        replay=(lambda old: _last_records(old, since_ms, last))
        if since_ms is not None or last
        else False,
        poll=poll,
        chain=paths.outbox_successors,
    )
    for raw in lines:
        rec = _parse_record(raw)
        if rec is not None and _after(rec, since_ms):
            yield rec


def _last_records(old: list[bytes], since_ms: int | None, last: int | None) -> list[bytes]:
    """Of the lines already in the outbox, the records `follow_deliveries` shows first."""
    kept = [raw for raw in old if (rec := _parse_record(raw)) is not None and _after(rec, since_ms)]
    return kept if last is None else kept[len(kept) - last :] if last else []
