"""Living beside today's OpenClaw: its running gateway (finding it, its version, which write
mode applies, writes in their gateway form) and exporting its SQLite store as a state dir.
Reading that store is `state.openclaw_sqlite`, one reader among the store readers.

Which module to open when a call to the gateway failed, from the top of a call to the bytes:

| the call failed… | open |
| --- | --- |
| at the wrong gateway, or with the wrong credentials for a `--gateway URL` | `target.py` (which gateway, its URL, token and TLS pin, by precedence) |
| before any connection: gateway not found, its version, a write refused beside it | `gateway.py` (finding it, `call`: the one entry every caller uses, the transport chosen) |
| with a retry, a re-attach, the wrong scopes, one connection per process | `wsclient.py` (the per-process client: when to connect, which scopes, what to retry) |
| in the handshake (challenge, `connect`, `hello-ok`), or with the gateway's error words | `wsconnection.py` (one connection: open it, request and answer, errors worded); the error classes themselves in `gateway_errors.py` |
| on the wire: the upgrade, a frame, a size limit, a deadline, a close | `websocket.py` (RFC 6455 over a socket) |
| through `openclaw gateway call` (a protocol sessiontool's client does not speak) | `clicall.py` (one Node process per call, its process group) |
| at TLS, the shared secret, the device or its pairing | `tls.py`, `secrets.py`, `device.py`, `pairing.py` |

What the calls are for: `gateway_reader.py` (reads through the gateway), `gateway_follow.py`
(`history --follow`'s events), `own_tools.py` (OpenClaw's own session tools, `tools.invoke`),
`gateway_doctor.py` (`doctor` on a remote gateway)."""

from __future__ import annotations

from pathlib import Path


def install_store_guard() -> None:
    """Make every sessions.json write of this process ask the running gateway's facts first
    (`gateway.guard_store_write`: refused beside a lock-ignoring gateway, else its lock payload).
    The store module knows nothing of gateways: the command layer and the worker install this,
    and the gateway module is imported only when a write to an OpenClaw state dir asks."""
    from sessiontool.state import sessions_json

    sessions_json.set_write_guard(_guard)


def _guard(store_path: Path) -> str:
    from sessiontool.openclaw.gateway import guard_store_write

    return guard_store_write(store_path)
