"""Reads through OpenClaw's gateway as a remote target (issue 26): from an empty state dir with
`--gateway ws://127.0.0.1:PORT`, on a live 2026.9.6 gateway over a copy of the fixture, side by
side in one run:
- `list --json` through the gateway vs `openclaw sessions --json` on the same state (≥ 10×);
- `history main --limit 20 --json` through the gateway vs the local SQLite read (≤ 2× slower).
Both go through `gateway.call`, sessiontool's own WebSocket client (one connection per process;
through the `openclaw` CLI before it, a Node start per call: list 1.4× faster, history 16×
slower)."""

from __future__ import annotations

import json
import os
import shutil
import statistics

from cases_openclaw import start_gateway
from harness import ROOT, Bench, Row, Sample, case, ms, pair_ratios, ratio, ratio_spread

OPENCLAW_BIN = os.environ.get("OPENCLAW_BIN", "/opt/peers/openclaw-bin")


def spread(s: Sample) -> str:
    return f"min {ms(min(s.times))} / median {ms(s.median)} / max {ms(max(s.times))}"


@case
def remote_reads_through_gateway(bench: Bench) -> list[Row]:
    import signal
    import sys
    import time

    label = "reads through a loopback gateway as a remote target"
    if not os.access(OPENCLAW_BIN, os.X_OK):
        return [Row(label, f"not measured: no openclaw at {OPENCLAW_BIN}")]
    sys.path.insert(0, str(ROOT))
    from tests.interop_openclaw.conftest import copy_fixture, free_port, oc_env

    base = bench.data / "oc-remote"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    gw_port, llm_port = free_port(), free_port()
    state = copy_fixture(base / "state", gw_port, llm_port)
    empty = base / "empty"
    empty.mkdir()
    home = base / "home"
    home.mkdir()
    os.environ["OPENCLAW_BIN"] = OPENCLAW_BIN
    env = oc_env(state, home)
    procs, log = start_gateway(base, env, gw_port, llm_port)
    saved = bench.env
    rows: list[Row] = []
    try:
        deadline = time.monotonic() + 300
        while b"listening" not in log.read_bytes():
            if time.monotonic() > deadline or procs[1].poll() is not None:
                return [Row(label, "not measured: the gateway did not start")]
            time.sleep(1)
        bench.env = {**bench.env, **env}
        url = f"ws://127.0.0.1:{gw_port}"
        remote = ("--state-dir", str(empty), "--gateway", url)
        ours = bench.sessiontool(*remote, "list", "--json")
        theirs = [OPENCLAW_BIN, "sessions", "--json"]
        assert bench.json_output(ours)["count"] == bench.json_output(theirs)["count"] == 10
        runs = bench.n(7, 3)
        a, b = bench.compare(ours, theirs, runs)
        r = ratio(b.median, a.median)
        rows.append(
            Row(
                f"`list --json` through the gateway vs `openclaw sessions --json` (median of {runs})",
                f"sessiontool {spread(a)}; openclaw {spread(b)}: {r:.1f}× faster",
                "≥ 10×",
                r >= 10,
            )
        )
        hist = ("history", "main", "--limit", "20", "--json")
        via = bench.sessiontool(*remote, *hist)
        local = bench.sessiontool("--state-dir", str(state), *hist)
        assert json.loads(bench.output(via)) == json.loads(bench.output(local))
        a, b = bench.compare(via, local, runs)
        r = ratio(a.median, b.median)
        rows.append(
            Row(
                f"`history --limit 20` through the gateway vs the local SQLite read (median of {runs})",
                f"gateway {spread(a)}; local {spread(b)}: {r:.2f}× its time",
                "≤ 2×",
                r <= 2,
            )
        )
    finally:
        bench.env = saved
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            p.wait()
    return rows


@case
def remote_send_namespace_vs_loopback(bench: Bench) -> list[Row]:
    """`send` to the real gateway in another network namespace (over a veth pair, paired
    device, its device token) vs the same gateway process on its own loopback (device-less
    `cli` with the shared token): what leaving the machine costs. Both commands start through
    `ip netns exec` (the near side is a namespace too), so neither pays for it alone."""
    import re
    import subprocess
    import sys

    label = "`send` to a gateway in another network namespace vs the same gateway on loopback"
    sys.path.insert(0, str(ROOT))
    os.environ["OPENCLAW_BIN"] = OPENCLAW_BIN
    from tests.interop_openclaw.conftest import TOKEN
    from tests.interop_openclaw.netns import Netns, why_not

    reason = why_not()
    if reason is not None:
        return [Row(label, f"not measured: {reason}")]
    base = bench.data / "oc-netns"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    net = Netns(base, client_ns=True)
    saved = bench.env
    try:
        gw = net.start("gw")
        gw.wait_listening()
        bench.env = {**bench.env, "OPENCLAW_GATEWAY_TOKEN": TOKEN, "SESSIONTOOL_OPENCLAW_BIN": ""}
        for name in ("OPENCLAW_CONFIG_PATH", "OPENCLAW_STATE_DIR", "SESSIONTOOL_GATEWAY_URL"):
            bench.env.pop(name, None)
        send = ("send", "main", "bench over the wire", "--timeout", "120", "--json")
        far = [
            *net.exec_prefix("client"),
            *bench.sessiontool("--state-dir", str(base / "far"), "--gateway", gw.url, *send),
        ]
        near = [
            *net.exec_prefix("gw"),
            *bench.sessiontool(
                "--state-dir", str(base / "near"), "--gateway", f"ws://127.0.0.1:{gw.port}", *send
            ),
        ]
        for _ in range(3):  # pairing, then any scope upgrade the send asks for
            first = subprocess.run(far, capture_output=True, text=True, env=bench.env)
            if first.returncode == 0:
                break
            m = re.search(r"openclaw devices approve (\S+)", first.stderr)
            if first.returncode != 4 or not m:
                return [Row(label, f"not measured: {' '.join(first.stderr.split())[-300:]}")]
            ok = gw.oc("devices", "approve", m.group(1))
            if ok.returncode != 0:
                return [Row(label, f"not measured: approve failed ({ok.stderr[-300:]})")]
        else:
            return [Row(label, "not measured: still not approved after three approvals")]
        for cmd in (far, near):
            assert bench.json_output(cmd)["status"] == "ok"
        runs = bench.n(15, 3)
        a, b = bench.compare(far, near, runs)
        rs = pair_ratios(a, b)
        r = statistics.median(rs)
        return [
            Row(
                f"{label} (median of {runs}, pairwise)",
                f"namespace {spread(a)}; loopback {spread(b)}: {r:.2f}× its time "
                f"(pairs {ratio_spread(rs)}); CPU of the command {ms(a.median_cpu)} vs "
                f"{ms(b.median_cpu)}",
                "≤ 1.1×",
                r <= 1.1,
            )
        ]
    finally:
        bench.env = saved
        net.close()
