"""The real program side by side: `clawdbot sessions --json` (clawdbot 2026.1.24-3 on Node, as
installed by tests/fixtures/tools/setup-peers.sh, or $CLAWDBOT_BIN) vs `sessiontool list
--json` on a copy of the Clawdbot fixtures' state dir. Skipped (one row saying so) when the
peer is not installed."""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from pathlib import Path

from harness import ROOT, Bench, Row, case, ratio

FIXTURE_STATE = ROOT / "tests" / "fixtures" / "clawdbot-2026.1.24" / "state"
DEFAULT_BIN = Path("/opt/peers/clawdbot")
SKIPPED = "skipped: clawdbot not installed (run tests/fixtures/tools/setup-peers.sh)"


def clawdbot_bin() -> str | None:
    env = os.environ.get("CLAWDBOT_BIN")
    if env:
        found = shutil.which(env)
        return found if found else None
    return str(DEFAULT_BIN) if os.access(DEFAULT_BIN, os.X_OK) else None


def peer_env(bench: Bench, tmp: Path) -> dict[str, str]:
    """Like tests/fixtures/tools/cb_env.sh, pointed into `tmp`: its own HOME, state and
    config, no channels, cron or servers."""
    env = dict(bench.env)
    env.update(
        HOME=str(tmp / "home"),
        CLAWDBOT_STATE_DIR=str(tmp / "state"),
        CLAWDBOT_CONFIG_PATH=str(tmp / "state" / "clawdbot.json"),
        CLAWDBOT_SKIP_CHANNELS="1",
        CLAWDBOT_DISABLE_BONJOUR="1",
        CLAWDBOT_SKIP_BROWSER_CONTROL_SERVER="1",
        CLAWDBOT_SKIP_CANVAS_HOST="1",
        CLAWDBOT_SKIP_GMAIL_WATCHER="1",
        CLAWDBOT_SKIP_CRON="1",
        TZ="UTC",
    )
    return env


@case(after="parallel_sends")
def peer_clawdbot(bench: Bench) -> list[Row]:
    """clawdbot sessions --json vs sessiontool list --json on the fixtures' state (if installed)."""
    label = "`clawdbot sessions --json` vs `sessiontool list --json`"
    binary = clawdbot_bin()
    if binary is None or not FIXTURE_STATE.is_dir():
        why = SKIPPED if binary is None else f"skipped: no fixture state at {FIXTURE_STATE}"
        return [Row(label, why)]
    bench.data.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".peer.", dir=bench.data))
    try:
        shutil.copytree(FIXTURE_STATE, tmp / "state")
        (tmp / "home").mkdir()
        peer = dataclasses.replace(bench, env=peer_env(bench, tmp))
        theirs = [binary, "sessions", "--json"]
        ours = bench.sessiontool("--state-dir", str(tmp / "state"), "list", "--json")
        n_theirs = peer.json_output(theirs)["count"]
        n_ours = peer.json_output(ours)["count"]
        runs = bench.n(7, 3)
        cb, st = peer.compare(theirs, ours, runs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    r_time = ratio(cb.median, st.median)
    r_rss = ratio(cb.peak_rss, st.peak_rss)
    what = f"{label}, fixtures' state ({n_theirs} / {n_ours} rows)"
    return [
        Row(
            f"{what} ({runs} runs each)",
            f"wall {cb.spread()} vs {st.spread()} (min / median / max), CPU {cb.cpu_spread()} vs "
            f"{st.cpu_spread()}: sessiontool {r_time:.1f}× faster (medians)",
            "≥ 20×",
            r_time >= 20,
        ),
        Row(
            f"{label}: peak RSS",
            f"{cb.rss_spread()} vs {st.rss_spread()}: sessiontool {r_rss:.1f}× less",
        ),
    ]
