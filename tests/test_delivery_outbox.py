"""With no delivery command configured nothing is sent anywhere: a delivery is recorded in the
outbox for a bridge to pick up (`outbox`), and no view calls it delivered (`send --deliver
--json`, `deliveries`, `history`, the HTML page)."""

from __future__ import annotations

import json
from pathlib import Path

from .helpers import run_cli, run_json, write_config
from .runhelpers import quiet, write_store

GROUP_KEY = "agent:main:discord:group:42"


def _store(state: Path) -> None:
    write_store(
        state,
        {
            GROUP_KEY: {
                "sessionId": "group-sess",
                "updatedAt": 1,
                "deliveryContext": {"channel": "discord", "to": "group:42"},
            }
        },
    )


def test_no_delivery_command_is_outbox_never_delivered(state: Path) -> None:
    _store(state)
    rc, sent = run_json("send", GROUP_KEY, "hello", "--deliver", "--timeout", "30")
    assert rc == 0, sent
    assert sent["delivery"]["status"] == "outbox"
    quiet(state)
    rc, listed = run_json("deliveries")
    assert rc == 0
    assert [d["status"] for d in listed["deliveries"]] == ["outbox"]
    # Nothing to retry: it is where a bridge picks it up.
    proc = run_cli("--json", "deliveries", "retry")
    assert proc.returncode == 0 and json.loads(proc.stdout)["count"] == 0
    for args in (("history", GROUP_KEY), ("history", GROUP_KEY, "--format", "html")):
        proc = run_cli(*args)
        assert proc.returncode == 0, proc.stderr
        assert "delivered" not in proc.stdout
        assert "in the outbox for discord" in proc.stdout
    out = state.parent / "site"
    proc = run_cli("export", "--html", str(out))
    assert proc.returncode == 0, proc.stderr
    pages = "".join(p.read_text() for p in out.rglob("*.html"))
    assert "in the outbox for discord" in pages and "delivered to discord" not in pages


def test_a_delivery_command_that_ran_is_delivered(state: Path, tmp_path: Path) -> None:
    _store(state)
    write_config(state, {"sessiontool": {"delivery": {"command": ["/bin/sh", "-c", "cat"]}}})
    rc, sent = run_json("send", GROUP_KEY, "hello", "--deliver", "--timeout", "30")
    assert rc == 0 and sent["delivery"]["status"] == "delivered", sent
    quiet(state)
    proc = run_cli("history", GROUP_KEY)
    assert "delivered to discord" in proc.stdout
