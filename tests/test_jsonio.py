"""The fast JSON paths: the orjson store encoder is byte-identical to json.dumps(indent=2) (and
falls back where orjson refuses or differs), the JSON5 translation parses what json5 parses to
the same values, JSON5 errors point at the real problem, and a no-op store write is skipped."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import json5
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontool.errors import ConfigError, CorruptStateError
from sessiontool.state import sessions_json as store
from sessiontool.state.config import load_config
from sessiontool.state.jsonio import (
    compact_utf8,
    json5_to_json,
    loads_tolerant,
    store_bytes,
    to_utf8,
)
from sessiontool.state.paths import StatePaths
from tests.helpers import FIXTURE_STATE, ROOT, run_cli

FIXTURES = ROOT / "tests" / "fixtures"


def old_indent2(obj: Any) -> bytes:
    """The encoder sessiontool used before orjson: the reference."""
    return to_utf8(obj, indent=2)


# -- the store encoder -------------------------------------------------------------------------

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([1e-5, -1e-7, 1.5e-300, 1e16, 1e21, -0.0, 0.0001, 5e-324])
    | st.text(max_size=12)
    | st.text(alphabet=st.characters(min_codepoint=0xD7F0, max_codepoint=0xE010), max_size=4)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=6), inner, max_size=4)
        | st.dictionaries(st.integers(-3, 3), inner, max_size=2)
    ),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(VALUES)
def test_store_encoder_is_byte_identical_to_json_dumps(value: Any) -> None:
    assert store_bytes(value) == old_indent2(value)
    assert compact_utf8(value) == to_utf8(value, separators=(",", ":"))


@pytest.mark.parametrize(
    "value",
    [
        {"a": "lone \ud800 surrogate"},  # orjson refuses it
        {"big": 2**64},  # beyond 64 bits
        {1: "int key", None: 2},  # non-string keys
        {"cost": 1.5e-05, "list": [1e-7, 0.00001]},  # tiny floats, formatted differently
        {"text": "3e-4, 0.0000 in a string is text"},
        {"nan": math.nan, "inf": -math.inf},  # with exact=True
        {"deep": [[[[[[[[[[[]]]]]]]]]]]},
        {"": {}, "empty": [], "uni": "é 中 😀 \u2028 \x7f \x00 \t"},
    ],
)
def test_store_encoder_fallbacks(value: Any) -> None:
    exact = "nan" in value
    assert store_bytes(value, exact=exact) == old_indent2(value)


def fixture_json_files() -> list[Path]:
    out = []
    for p in sorted(FIXTURES.rglob("*.json")):
        try:
            json.loads(p.read_bytes())
        except ValueError:
            continue
        out.append(p)
    return out


def test_fixture_files_encode_byte_identically() -> None:
    files = fixture_json_files()
    stores = [p for p in files if p.name == "sessions.json"]
    assert len(stores) >= 2 and len(files) >= 10
    for p in files:
        value = json.loads(p.read_bytes())
        assert store_bytes(value) == old_indent2(value), p
    # The real stores are OpenClaw's own JSON.stringify output, and stay so.
    for p in stores:
        if "clawdbot" in str(p) and "/state/" in str(p):
            assert store_bytes(json.loads(p.read_bytes())) == p.read_bytes(), p


@pytest.mark.slow
def test_a_50mb_store_encodes_byte_identically(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import datagen
    finally:
        sys.path.remove(str(ROOT / "bench"))
    entries = datagen.make_entries("main", 9000, snapshot=True, seed=7)
    path = datagen.write_store(tmp_path, "main", entries)  # written with json.dumps(indent=2)
    raw = path.read_bytes()
    assert len(raw) > 50_000_000
    parsed = json.loads(raw)
    assert store_bytes(parsed) == raw == old_indent2(parsed)


# -- no-op writes ------------------------------------------------------------------------------


def test_a_write_that_changes_nothing_is_skipped(tmp_path: Path) -> None:
    p = tmp_path / "sessions.json"
    p.write_bytes(old_indent2({"agent:main:a": {"sessionId": "a", "updatedAt": 1}}))
    before = os.stat(p)
    store.update_store(p, lambda s: s["agent:main:a"].update(updatedAt=1))
    after = os.stat(p)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    store.update_store(p, lambda s: s["agent:main:a"].update(updatedAt=2))
    assert os.stat(p).st_ino != before.st_ino  # a real change is an atomic replace
    assert json.loads(p.read_bytes())["agent:main:a"]["updatedAt"] == 2


def test_a_json5_store_is_rewritten_as_json_even_when_values_stay(tmp_path: Path) -> None:
    p = tmp_path / "sessions.json"
    p.write_text("{ // hand-edited\n 'agent:main:a': {sessionId: 'a', updatedAt: 1,},\n}")
    store.update_store(p, lambda s: None)
    assert p.read_bytes() == old_indent2({"agent:main:a": {"sessionId": "a", "updatedAt": 1}})


@pytest.mark.parametrize(
    ("raw", "written"),
    [("NaN", b'"x": NaN'), ("1e400", b'"x": Infinity'), ("-Infinity /* c */", b'"x": -Infinity')],
)
def test_nan_in_a_store_survives_a_rewrite(tmp_path: Path, raw: str, written: bytes) -> None:
    p = tmp_path / "sessions.json"
    p.write_text('{"agent:main:a": {"sessionId": "a", "updatedAt": 1, "x": ' + raw + "}}")
    store.update_store(p, lambda s: s["agent:main:a"].update(updatedAt=2))
    assert written in p.read_bytes()


# -- JSON5 -------------------------------------------------------------------------------------

KEYS = st.text(alphabet="abcxyz_$09:' \"/*,\\", min_size=1, max_size=6)
JVALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-1000, 1000)
    | st.text(alphabet="ab'\"\\/*,:{}[] \n\té", max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=12,
)


@st.composite
def json5_text(draw: st.DrawFn) -> str:
    """A JSON5 rendering of a value: comments, trailing commas, unquoted keys, single quotes."""

    def gap() -> str:
        return draw(st.sampled_from(["", " ", "\n", " // c, ] }\n", "/* x */", "/*'\"*/ "]))

    def render(v: Any) -> str:
        if isinstance(v, dict):
            items = []
            for k, x in v.items():
                if k.isidentifier() and draw(st.booleans()):
                    key = k
                elif "'" not in k and "\\" not in k and draw(st.booleans()):
                    key = "'" + k.replace('"', '\\"' if draw(st.booleans()) else '"') + "'"
                else:
                    key = json.dumps(k)
                items.append(gap() + key + gap() + ":" + gap() + render(x) + gap())
            trail = "," + gap() if items and draw(st.booleans()) else ""
            return "{" + ",".join(items) + trail + "}"
        if isinstance(v, list):
            parts = [gap() + render(x) + gap() for x in v]
            trail = "," + gap() if parts and draw(st.booleans()) else ""
            return "[" + ",".join(parts) + trail + "]"
        if isinstance(v, str) and "\n" not in v and "\t" not in v and draw(st.booleans()):
            return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
        return json.dumps(v, ensure_ascii=False)

    return render(draw(JVALUES))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json5_text())
def test_json5_translation_agrees_with_json5(text: str) -> None:
    expected = json5.loads(text)
    assert loads_tolerant(text) == expected
    fast = json5_to_json(text)
    if fast is not None:  # when the fast path parses, it is the same value
        try:
            assert json.loads(fast) == expected
        except ValueError:
            pass


def test_common_json5_takes_the_fast_path() -> None:
    text = "{\n  // the agents\n  agents: { list: [{id: 'main', name: 'it\\'s \"me\"'},], },\n}\n"
    fast = json5_to_json(text)
    assert fast is not None
    assert json.loads(fast) == json5.loads(text)
    assert len(fast.splitlines()) == len(text.splitlines())


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ("{\n  // one\n  // two\n  a: 1,\n  b: oops,\n}", 5, 6),
        ("{\n  /* a\n  long comment */\n  'x': [1, 2,],\n  \"y\": }", 5, 8),
        ('{\n  "a": 1,\n  "b": [1, 2\n}', 4, 1),
    ],
)
def test_json5_errors_name_the_real_line_and_column(text: str, line: int, column: int) -> None:
    with pytest.raises(json.JSONDecodeError) as info:
        loads_tolerant(text)
    assert (info.value.lineno, info.value.colno) == (line, column)


def test_config_and_store_errors_carry_that_position(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "sessiontool.json5").write_text("{\n  // comment\n  session: {\n    mainKey: ,\n}")
    with pytest.raises(ConfigError, match=r"line 4 column 14"):
        load_config(StatePaths(state))
    p = tmp_path / "s.json"
    p.write_text('{\n  // comment\n  "agent:main:a": {"sessionId": "a",},\n  "b": x\n}')
    with pytest.raises(CorruptStateError, match=r"line 4, column 8"):
        store.read_store(p)


def test_json5_config_does_not_import_json5(tmp_path: Path) -> None:
    """The hand-written config of the fixtures (comments, unquoted keys, trailing commas)
    parses on the fast path: json5 is never imported."""
    probe = (
        "import sys\n"
        "from sessiontool.state.jsonio import loads_tolerant\n"
        f"v = loads_tolerant(open({str(FIXTURE_STATE / 'clawdbot.json')!r}).read())\n"
        "assert isinstance(v, dict) and v\n"
        "print('json5' in sys.modules)\n"
    )
    out = run_cli_python(probe)
    assert out.strip() == "False"


def run_cli_python(code: str) -> str:
    import subprocess

    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_trailing_comma_store_lists(tmp_path: Path) -> None:
    state = tmp_path / "state"
    d = state / "agents" / "main" / "sessions"
    d.mkdir(parents=True)
    entries = {f"agent:main:s{i}": {"sessionId": f"s{i}", "updatedAt": i} for i in range(50)}
    text = json.dumps(entries, indent=2)
    (d / "sessions.json").write_text(text[:-2] + ",\n}")  # one trailing comma at the end
    proc = run_cli("--state-dir", str(state), "list", "--json", "--limit", "all")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["count"] == 50
