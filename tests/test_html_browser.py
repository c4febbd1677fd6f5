"""The exported site in a real browser: headless Chromium (Debian's package, installed by
scripts/ensure-chromium when missing) with JavaScript disabled opens the index and a session
page of the exported OpenClaw fixture; the screenshots are not blank and the text the browser
dumps holds the first and the last message. Skipped, with the reason, only where Chromium cannot
be installed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import subprocess
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from sessiontool.flow.delivery import mirror_message
from tests import htmlcheck
from tests.cdp import Browser
from tests.helpers import FIXTURE_STATE, ROOT, run_cli, run_json
from tests.test_cli_html import OC_STATE, _append, _index

pytestmark = pytest.mark.slow

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


@pytest.fixture(scope="module")
def chromium() -> str:
    try:
        proc = subprocess.run(
            ["bash", str(ROOT / "scripts" / "ensure-chromium")],
            capture_output=True,
            text=True,
            timeout=900,
        )
    except subprocess.TimeoutExpired:
        pytest.skip("Chromium could not be installed: scripts/ensure-chromium took over 900 s")
    line = (proc.stdout.strip().splitlines() or ["(no output)"])[-1]
    if proc.returncode != 0:
        pytest.skip(f"Chromium could not be installed: {line}")
    return line


def browse(chromium: str, tmp: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """One headless run with a fresh profile whose content settings block JavaScript."""
    profile = Path(tmp) / f"profile-{len(list(Path(tmp).glob('profile-*')))}"
    (profile / "Default").mkdir(parents=True)
    prefs = {"profile": {"default_content_setting_values": {"javascript": 2}}}
    (profile / "Default" / "Preferences").write_text(json.dumps(prefs))
    cmd = [chromium, *FLAGS, f"--user-data-dir={profile}", *args, url]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise AssertionError(f"chromium did not finish in 180 s: {cmd}") from None
    finally:
        try:  # anything the browser left in its group (zygotes, GPU process)
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and each pixel of an 8-bit RGB or RGBA PNG (zlib and the PNG filters by
    hand: no imaging library)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, ihdr = 8, [], b""
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        if kind == b"IHDR":
            ihdr = body
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + n
    width, height, depth, color, _c, _f, interlace = struct.unpack(">IIBBBBB", ihdr)
    assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
    bpp = 4 if color == 6 else 3
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    prev = bytearray(stride)
    rows = []
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        if f == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif f == 2:
            for i in range(stride):
                line[i] = (line[i] + prev[i]) & 0xFF
        elif f == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif f == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        prev = line
    pixels = [row[i : i + 3] for row in rows for i in range(0, stride, bpp)]
    return width, height, pixels


def assert_not_blank(png: Path) -> None:
    width, height, pixels = png_pixels(png.read_bytes())
    assert width >= 800 and height >= 600
    counts = Counter(pixels)
    background, n_bg = counts.most_common(1)[0]
    assert len(counts) >= 50, f"{png.name}: only {len(counts)} colours"
    assert 1 - n_bg / len(pixels) >= 0.02, f"{png.name}: {n_bg / len(pixels):.1%} background"
    luma = [0.299 * p[0] + 0.587 * p[1] + 0.114 * p[2] for p in pixels[::7]]
    mean = sum(luma) / len(luma)
    assert sum((v - mean) ** 2 for v in luma) / len(luma) > 20, f"{png.name}: flat image"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    base = tmp_path_factory.mktemp("browser")
    state = base / "state"
    shutil.copytree(OC_STATE, state)
    out = base / "site"
    proc = run_cli("--state-dir", str(state), "export", "--html", str(out), "--all-agents")
    assert proc.returncode == 0, proc.stderr
    rc, h = run_json("--state-dir", str(state), "history", "main", "--include-tools")
    assert rc == 0
    return out, h


def test_javascript_is_off_in_the_browser_profile(chromium: str, tmp_path: Path) -> None:
    page = tmp_path / "js.html"
    page.write_text(
        '<p id="x">static</p><script>document.getElementById("x").textContent="ran"</script>'
    )
    proc = browse(chromium, tmp_path, page.as_uri(), "--dump-dom")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert '<p id="x">static</p>' in proc.stdout


def test_index_and_session_page_in_chromium(
    chromium: str, site: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    out, history = site
    pages = _index(out)
    main_page = pages["agent:main:main"]
    for name, path in (("index", out / "index.html"), ("main", main_page)):
        png = tmp_path / f"{name}.png"
        shot = browse(
            chromium, tmp_path, path.as_uri(), "--window-size=1100,900", f"--screenshot={png}"
        )
        assert shot.returncode == 0 and png.is_file(), shot.stderr[-2000:]
        assert_not_blank(png)
    index = browse(chromium, tmp_path, (out / "index.html").as_uri(), "--dump-dom")
    assert index.returncode == 0
    dumped = htmlcheck.Page(index.stdout).text
    assert all(key in dumped for key in pages)
    dom = browse(chromium, tmp_path, main_page.as_uri(), "--dump-dom")
    assert dom.returncode == 0
    page = htmlcheck.Page(dom.stdout)
    messages = history["messages"]
    first, last = htmlcheck.expected_pieces(messages[0]), htmlcheck.expected_pieces(messages[-1])
    assert first and last
    for piece in first:
        assert piece in page.text_of(0)
    for piece in last:
        assert piece in page.text_of(len(messages) - 1)
    assert len(page.messages) == len(messages)


# -- layout from a phone to a desktop (issue 33 items 7-9) -----------------------------------

WIDTHS = (360, 400, 800, 1280)
MARKDOWN = """The fix, in **three** steps:

1. stop the gateway
2. run `sessiontool doctor`
3. start it again

```sh
openclaw gateway start --port 18789 --bind loopback --with-a-long-flag-that-needs-room
```

| step | takes |
|------|-------|
| stop | 2 s   |

[the docs](https://docs.example.com/gateway) · [not a link](javascript:alert(1))"""


@pytest.fixture(scope="module")
def rich_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The Clawdbot fixture exported with a Markdown reply and an 80-line one (folded)."""
    base = tmp_path_factory.mktemp("layout")
    state = base / "state"
    shutil.copytree(FIXTURE_STATE, state)
    ts = 1795292600000
    _append(
        state,
        "agent:main:dm:alice",
        {"role": "user", "content": "How do I restart it?", "timestamp": ts},
        {"role": "assistant", "content": [{"type": "text", "text": MARKDOWN}], "timestamp": ts + 1},
        mirror_message(MARKDOWN, ts + 1),  # as OpenClaw writes it after posting the reply
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "\n".join(f"line {i}" for i in range(80))}],
            "timestamp": ts + 2,
        },
    )
    out = base / "site"
    proc = run_cli("--state-dir", str(state), "export", "--html", str(out), "--all-agents")
    assert proc.returncode == 0, proc.stderr
    return out, _index(out)["agent:main:dm:alice"]


OVERFLOW = """JSON.stringify({
  scroll: document.documentElement.scrollWidth,
  client: document.documentElement.clientWidth,
  wider: [...document.querySelectorAll('main *')]
    .filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
    .filter(e => !e.closest('pre, .md table'))
    .map(e => e.tagName + '.' + e.className).slice(0, 5),
})"""
KEYS = """JSON.stringify([...document.querySelectorAll('td.key > a')].map(a => ({
  key: a.textContent, lines: new Set([...a.getClientRects()].map(r => Math.round(r.top))).size,
})))"""


def test_index_fits_from_a_phone_to_a_desktop(
    chromium: str, rich_site: tuple[Path, Path], tmp_path: Path
) -> None:
    """No horizontal overflow at any width, each key on as few lines as the width needs (broken
    after a colon, never every few characters), and the figures named on a phone."""
    out, _page = rich_site
    with Browser(chromium, tmp_path / "profile") as b:
        for width in WIDTHS:
            b.open((out / "index.html").as_uri(), width)
            fit = json.loads(b.eval(OVERFLOW))
            assert fit["scroll"] <= fit["client"] == width and not fit["wider"], (width, fit)
            keys = json.loads(b.eval(KEYS))
            assert len(keys) >= 10
            for k in keys:
                # ~38 characters fit on a 360 px line: a key takes the lines its length needs.
                assert k["lines"] <= 1 + len(k["key"]) // 30, (width, k)
                if width >= 1280 and len(k["key"]) <= 60:
                    assert k["lines"] == 1, (width, k)
            if width <= 800:  # cards: no table head, each figure named
                label = "getComputedStyle(document.querySelector('td[data-label]'), '::after')"
                assert "message" in b.eval(label + ".content"), width
                assert b.eval("getComputedStyle(document.querySelector('thead')).display") == "none"
            png = b.screenshot(tmp_path / f"index-{width}.png")
            _w, _h, pixels = png_pixels(png.read_bytes())
            assert len(Counter(pixels)) >= 50, f"{png.name}: blank"
            if os.environ.get("SESSIONTOOL_SHOTS"):
                shutil.copy(png, Path(os.environ["SESSIONTOOL_SHOTS"]) / png.name)


def test_session_page_with_markdown_fits_and_renders(
    chromium: str, rich_site: tuple[Path, Path], tmp_path: Path
) -> None:
    _out, page = rich_site
    with Browser(chromium, tmp_path / "profile") as b:
        for width in (360, 400, 1280):
            b.open(page.as_uri(), width)
            fit = json.loads(b.eval(OVERFLOW))
            assert fit["scroll"] <= fit["client"] == width and not fit["wider"], (width, fit)
            dom = json.loads(
                b.eval(
                    """JSON.stringify({
  code: [...document.querySelectorAll('.md pre > code')].map(c => c.textContent),
  strong: [...document.querySelectorAll('.md strong')].map(e => e.textContent),
  links: [...document.querySelectorAll('.md a')].map(a => a.href),
  folds: [...document.querySelectorAll('details.more')].map(d => [d.open,
    d.querySelector('summary').textContent]),
  mono: getComputedStyle(document.querySelector('.md pre > code')).fontFamily,
  mirror: [...document.querySelectorAll('.dlv')].map(d => [d.innerText.trim(),
    d.getBoundingClientRect().height])[0],
})"""
                )
            )
            assert any("openclaw gateway start" in c for c in dom["code"]), dom
            assert "three" in dom["strong"], dom
            assert dom["links"] == ["https://docs.example.com/gateway"], dom
            assert [False, "60 more lines"] in dom["folds"], dom
            assert "mono" in dom["mono"].lower(), dom
            # The reply's delivery mirror: one small line under it, not the reply again.
            assert dom["mirror"][0].startswith("↳ delivered · ") and dom["mirror"][1] < 60, dom
            assert len(dom["code"]) == 1, dom
            b.eval("document.querySelector('.md pre').closest('article').scrollIntoView()")
            shot = b.screenshot(tmp_path / f"markdown-{width}.png")
            assert len(Counter(png_pixels(shot.read_bytes())[2])) >= 50, f"{shot.name}: blank"
            if os.environ.get("SESSIONTOOL_SHOTS"):
                shutil.copy(shot, Path(os.environ["SESSIONTOOL_SHOTS"]) / shot.name)


# -- the usage page on a phone (issue 45 item 12) ---------------------------------------------

# Models with long names, each priced: the per-model chart and tables have long labels and a
# cost column.
PRICED = {
    "openrouter": ("meta-llama/llama-4-maverick-instruct-long-context-preview", 1.5),
    "anthropic": ("claude-sonnet-4-5-20250929-with-a-very-long-suffix", 3.0),
    "fake": ("fake-model", 0.5),
}
USAGE_FIT = """JSON.stringify({
  client: document.documentElement.clientWidth,
  scroll: document.documentElement.scrollWidth,
  labels: [...document.querySelectorAll('.hbars .hl, svg text')].map(e => [e.textContent,
    e.getBoundingClientRect().height]),
  costs: [...document.querySelectorAll('table:not(.top) tr > :last-child, table.top tr > :first-child')]
    .map(e => [e.textContent, Math.round(e.getBoundingClientRect().left),
      Math.round(e.getBoundingClientRect().right)]),
})"""


CHART_BOXES = """JSON.stringify([...document.querySelectorAll('svg[viewBox]')].map(s => ({
  client: s.parentElement.clientWidth, scroll: s.parentElement.scrollWidth})))"""


@pytest.fixture(scope="module")
def usage_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("usage-layout")
    state = base / "state"
    shutil.copytree(FIXTURE_STATE, state)
    ts = 1795292600000
    turns = []
    for n, (provider, (model, _price)) in enumerate(PRICED.items()):
        usage = {"input": 120_000 * (n + 1), "output": 9_000, "cacheRead": 40_000, "cacheWrite": 0}
        turns.append(
            {
                "role": "assistant",
                "content": [{"type": "text", "text": f"priced turn {n}"}],
                "provider": provider,
                "model": model,
                "usage": {**usage, "totalTokens": sum(usage.values())},
                "timestamp": ts + n,
            }
        )
    for day in range(40):  # a priced turn a day for 40 days: a day chart wider than a phone
        turns.append({**turns[-1], "timestamp": ts - day * 86_400_000})
    _append(state, "agent:main:dm:alice", *turns)
    providers = {
        p: {"models": [{"id": m, "cost": {"input": price, "output": price * 5}}]}
        for p, (m, price) in PRICED.items()
    }
    (state / "sessiontool.json5").write_text(json.dumps({"models": {"providers": providers}}))
    out = base / "site"
    proc = run_cli("--state-dir", str(state), "export", "--html", str(out), "--all-agents")
    assert proc.returncode == 0, proc.stderr
    return out / "usage.html"


def test_usage_page_reads_on_a_phone(chromium: str, usage_site: Path, tmp_path: Path) -> None:
    """At 360 and 400 px the per-model charts' labels keep a readable size (an SVG scaled to
    the width drew them ~4 px high) and every table's cost column is on the screen, not past
    its right edge; at 1280 px the same page still lays the chart out in one row per model."""
    with Browser(chromium, tmp_path / "profile") as b:
        for width in (360, 400, 1280):
            b.open(usage_site.as_uri(), width)
            fit = json.loads(b.eval(USAGE_FIT))
            assert fit["scroll"] <= fit["client"] == width, (width, fit)
            labels = [t for t, _h in fit["labels"]]
            for _provider, (model, _price) in PRICED.items():
                assert any(model in t for t in labels), (model, labels)
            small = [(t, h) for t, h in fit["labels"] if h < 10]
            assert not small, (width, small)
            # a chart wider than the page scrolls in its box; the page itself does not
            boxes = json.loads(b.eval(CHART_BOXES))
            assert boxes and all(box["client"] <= width for box in boxes), (width, boxes)
            if width <= 400:
                assert any(box["scroll"] > box["client"] for box in boxes), boxes
            assert len(fit["costs"]) >= 2 * (len(PRICED) + 1), fit["costs"]
            off = [c for c in fit["costs"] if c[1] < 0 or c[2] > width]
            assert not off, (width, off)
            assert any(c[0].startswith("$") for c in fit["costs"])
            png = b.screenshot(tmp_path / f"usage-{width}.png")
            assert len(Counter(png_pixels(png.read_bytes())[2])) >= 50, f"{png.name}: blank"
            if os.environ.get("SESSIONTOOL_SHOTS"):
                shutil.copy(png, Path(os.environ["SESSIONTOOL_SHOTS"]) / png.name)
