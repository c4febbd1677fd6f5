"""`--json` output never carries C1 or bidi controls raw (a terminal acts on `\\x9b`, a bidi
override turns the line around): they are written as `\\u009b`, `\\u202e`, the same JSON."""

from __future__ import annotations

import json

from .helpers import run_cli

RAW = ("\u009b", "\u0085", "\u202e", "\u2066", "\u200f", "\u061c")


def test_json_output_escapes_c1_and_bidi_controls(state: object) -> None:
    words = "hi " + "".join(RAW) + " there"
    assert run_cli("send", "main", words, "--timeout", "30").returncode == 0
    label = "a" + "".join(RAW) + "b — ok"
    proc = run_cli("label", "main", label)
    assert proc.returncode == 0, proc.stderr
    for args in (("--json", "list"), ("--json", "history", "main"), ("--json", "runs")):
        proc = run_cli(*args)
        assert proc.returncode == 0, (args, proc.stderr)
        assert not any(c in proc.stdout for c in RAW), args
        assert "\\u202e" in proc.stdout and "\\u009b" in proc.stdout, args
        assert "—" in proc.stdout or args[1] != "list"  # other text stays as it is
    listed = json.loads(run_cli("--json", "list").stdout)
    assert [s["label"] for s in listed["sessions"] if s.get("label")] == [label]
    history = json.loads(run_cli("--json", "history", "main").stdout)
    assert any(words in json.dumps(m, ensure_ascii=False) for m in history["messages"])
