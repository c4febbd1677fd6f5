"""`history --format html` of a 10,000-message session against `--format markdown` of the same
messages (issue 25): time (≤ 2×) and the page's size against the transcript's text (≤ 1.5×).

The session repeats the Clawdbot fixtures' real message lines (user, assistant with usage, tool
calls and results) up to exactly 10,000 messages. Markdown runs with `--include-tools` so both
sides render the same messages (an HTML page always folds the tool results in). "The
transcript's text" is that Markdown output: the messages' text with one heading each."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import datagen
from cases_read import median_ratio, side_by_side
from harness import Bench, Row, case, dataset

MESSAGES = 10_000


def html_state(bench: Bench) -> Path:
    def build(root: Path) -> None:
        entry = datagen.template_entry()
        entry.update(sessionId="html-10k", updatedAt=datagen.BASE_MS)
        d = datagen.write_store(root, "main", {"agent:main:html": entry}).parent
        lines = datagen.transcript_lines()
        head = {
            "type": "session",
            "version": 3,
            "id": "html-10k",
            "timestamp": "2026-11-21T20:00:00.000Z",
        }
        with open(d / "html-10k.jsonl", "wb") as fh:
            fh.write(json.dumps(head, separators=(",", ":")).encode() + b"\n")
            for i in range(MESSAGES):
                fh.write(lines[i % len(lines)])

    return dataset(bench.data, "html-10k", {"messages": MESSAGES, "v": 1}, build)


@case
def history_html(bench: Bench) -> list[Row]:
    state = html_state(bench)
    sd = ("--state-dir", str(state))
    out = Path(tempfile.mkdtemp(prefix="bench-html."))
    page, md = out / "page.html", out / "page.md"
    html_cmd = bench.sessiontool(
        *sd, "history", "agent:main:html", "--format", "html", "-o", str(page)
    )
    md_cmd = bench.sessiontool(
        *sd, "history", "agent:main:html", "--format", "markdown", "--include-tools", "-o", str(md)
    )
    bench.output(html_cmd)
    bench.output(md_cmd)
    n_html = page.read_text().count('<article class="m ') + page.read_text().count('class="reset"')
    assert n_html == MESSAGES, n_html
    runs = bench.n(11, 5)
    s_html, s_md = bench.compare(html_cmd, md_cmd, runs)
    r = median_ratio(s_html, s_md)
    size_html, size_md = page.stat().st_size, md.stat().st_size
    jsonl = (state / "agents" / "main" / "sessions" / "html-10k.jsonl").stat().st_size
    label = f"`history --format html` vs `--format markdown --include-tools`, {MESSAGES:,} messages"
    return [
        Row(f"{label} ({runs} runs each)", side_by_side(s_html, s_md), "≤ 2× (median)", r <= 2.0),
        Row(
            f"{label}: page size vs the transcript's text (the Markdown)",
            f"{size_html / 1e6:.2f} MB vs {size_md / 1e6:.2f} MB = {size_html / size_md:.2f}× "
            f"(the JSONL transcript: {jsonl / 1e6:.2f} MB)",
            "≤ 1.5×",
            size_html <= 1.5 * size_md,
        ),
    ]
