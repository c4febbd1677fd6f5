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


def test_every_character_the_cli_escapes_is_escaped_in_json_both_ways() -> None:
    """The JSON writer's two spellings of the set (str for json.dumps, UTF-8 bytes for orjson)
    cover every character the terminal rule escapes (termtext.UNSAFE) that JSON leaves raw,
    and the JSON reads back the same."""
    import re

    from sessiontool.cli.jsonout import json_bytes, json_line
    from sessiontool.termtext import UNSAFE

    chars = [chr(o) for o in range(0x7F, 0x2070) if re.match(f"[{UNSAFE}]", chr(o))]
    assert "\u202e" in chars and "\x9b" in chars and "\x7f" in chars
    for c in chars:
        obj = {"k": f"a{c}b", "n": [c]}
        for out in (json_bytes(obj).decode(), json_line(obj)):
            assert c not in out and f"\\u{ord(c):04x}" in out, hex(ord(c))
            assert json.loads(out) == obj
    plain = {"k": "é — “ok” 中文 \u2030"}
    assert json.loads(json_bytes(plain)) == plain and "—" in json_bytes(plain).decode()
