"""What a new user meets first (issue 33 item 13): the README's `history` examples work on the
sessions a fresh state dir has after the first `send` (no session of someone else's named), and
a full key or a sessionId that matches nothing is not told to "use the full key"."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from tests.helpers import ROOT, run_cli


def _history_examples() -> list[list[str]]:
    text = (ROOT / "README.md").read_text()
    out = []
    for line in re.findall(r"^sessiontool history .* -o .*$", text, re.MULTILINE):
        out.append(shlex.split(line.split(" # ")[0]))
    return out


def test_readme_history_examples_run_after_a_first_send(tmp_path: Path, state: Path) -> None:
    examples = _history_examples()
    assert len(examples) >= 2
    assert run_cli("send", "main", "hello").returncode == 0
    for argv in examples:
        proc = run_cli(*argv[1:], cwd=tmp_path)
        assert proc.returncode == 0, (argv, proc.stderr)
        out = tmp_path / argv[argv.index("-o") + 1]
        assert "hello" in out.read_text(), argv


def test_not_found_hint_fits_what_was_typed(state: Path) -> None:
    assert run_cli("send", "main", "hello").returncode == 0
    for typed in ("agent:main:dm:nobody", "12345678-1234-1234-1234-123456789012"):
        proc = run_cli("history", typed)
        assert proc.returncode == 3
        assert "use the full key" not in proc.stderr, proc.stderr
        assert f"Session not found: {typed}" in proc.stderr
        assert "hint: sessiontool list shows the" in proc.stderr
    bare = run_cli("history", "dm:nobody")  # a bare key is the requester agent's: the hint helps
    assert bare.returncode == 3 and "(use the full key from list)" in bare.stderr
