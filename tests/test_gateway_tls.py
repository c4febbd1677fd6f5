"""wss:// to a remote gateway, against the scripted fake gateway serving TLS (tests/fakes/gateway.py
logs every HTTP upgrade and every `connect` frame it receives): a pinned certificate
(`gateway.remote.tlsFingerprint`, OpenClaw's formats) connects; a wrong pin is refused with exit 4
and one line before anything is sent (no upgrade request, so no token, password, device token or
device signature); without a pin the certificate is checked against the trust store."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_cli

from .fakes import gateway as fake

TOKEN = "s3cret-TLS-t0ken"


@pytest.fixture
def tls(tmp_path: Path) -> tuple[Path, Path, str]:
    return fake.self_signed(tmp_path / "tls")


@pytest.fixture
def gw(tmp_path: Path, tls: tuple[Path, Path, str]) -> Iterator[Any]:
    """start(**cfg) → a fake gateway serving wss:// with the test's certificate."""
    stack: list[Any] = []

    def start(**cfg: Any) -> fake.FakeGateway:
        cm = fake.running(
            tmp_path / f"gw{len(stack)}", tls={"cert": str(tls[0]), "key": str(tls[1])}, **cfg
        )
        stack.append(cm)
        return cm.__enter__()

    yield start
    for cm in reversed(stack):
        cm.__exit__(None, None, None)


def client(tmp_path: Path, url: str, pin: str | None, token: str | None = TOKEN) -> dict[str, str]:
    """An OpenClaw client config naming the remote gateway (what `openclaw config set
    gateway.remote.*` writes), and the env for a sessiontool with an empty state dir."""
    remote: dict[str, Any] = {"url": url}
    if token:
        remote["token"] = token
    if pin:
        remote["tlsFingerprint"] = pin
    cfg = tmp_path / f"client-{len(list(tmp_path.glob('client-*')))}.json"
    cfg.write_text(json.dumps({"gateway": {"mode": "remote", "remote": remote}}))
    state = tmp_path / "local-state"
    state.mkdir(exist_ok=True)
    return {"OPENCLAW_CONFIG_PATH": str(cfg), "SESSIONTOOL_STATE_DIR": str(state)}


def wrong(pin: str) -> str:
    """Another certificate's fingerprint, in the same form."""
    hexes = pin.replace(":", "")
    other = f"{(int(hexes, 16) ^ 1):064X}"
    return ":".join(other[i : i + 2] for i in range(0, 64, 2))


def test_the_right_pin_connects_and_a_wrong_one_is_refused_before_any_secret(
    tmp_path: Path, gw: Any, tls: tuple[Path, Path, str]
) -> None:
    served = tls[2].replace(":", "").lower()
    # A shared token: the pinned connection carries it; the wrong pin sends nothing at all.
    g = gw(token=TOKEN)
    url = f"wss://127.0.0.1:{g.port}"
    ok = run_cli("list", "--json", env=client(tmp_path, url, tls[2]))
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["count"] == 0
    seen = g.rows()
    assert [r["method"] for r in seen[:2]] == ["http-upgrade", "connect"]
    assert seen[1]["params"]["auth"] == ["token"]
    bad = run_cli("list", env=client(tmp_path, url, wrong(tls[2])))
    assert bad.returncode == 4, bad.stderr
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sessiontool: error:"), bad.stderr
    # The served certificate's fingerprint is in the error: the TLS handshake did complete...
    assert served in lines[0] and "not the pinned one" in lines[0] and url in lines[0]
    # ...and then nothing reached the server: no upgrade request, no connect frame.
    assert g.rows() == seen
    assert TOKEN not in bad.stderr + bad.stdout

    # A device (no shared secret): paired over the pinned connection; the wrong pin sends
    # neither its device token nor a signature.
    d = gw()
    url = f"wss://127.0.0.1:{d.port}"
    ok = run_cli("list", "--json", env=client(tmp_path, url, "sha256:" + served, token=None))
    assert ok.returncode == 0, ok.stderr
    seen = d.rows()
    assert [r["method"] for r in seen[:2]] == ["http-upgrade", "connect"]
    assert seen[1]["params"]["device"] is True
    state = Path(client(tmp_path, url, None)["SESSIONTOOL_STATE_DIR"])
    ident = next(state.rglob("gateway-device.json"))
    stored = json.loads(ident.read_text())
    assert stored["tokens"][url]["token"]  # the device token hello-ok issued
    bad = run_cli("list", env=client(tmp_path, url, wrong(tls[2]), token=None))
    assert bad.returncode == 4 and "not the pinned one" in bad.stderr, bad.stderr
    assert d.rows() == seen
    for secret in (stored["tokens"][url]["token"], stored["privateKey"]):
        assert secret not in bad.stderr + bad.stdout


def test_without_a_pin_the_certificate_is_checked(
    tmp_path: Path, gw: Any, tls: tuple[Path, Path, str]
) -> None:
    g = gw(token=TOKEN)
    url = f"wss://127.0.0.1:{g.port}"
    env = client(tmp_path, url, None)
    proc = run_cli("list", env=env)
    assert proc.returncode == 4, proc.stderr
    assert "TLS certificate is not trusted" in proc.stderr and "self-signed" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert g.rows() == [] and TOKEN not in proc.stderr
    # Trusted (its certificate is its own CA here): connects, host name checked against the SAN.
    proc = run_cli("list", "--json", env={**env, "SSL_CERT_FILE": str(tls[0])})
    assert proc.returncode == 0, proc.stderr
    assert [r["method"] for r in g.rows()[:2]] == ["http-upgrade", "connect"]


def test_a_pin_needs_wss_and_a_sha256_fingerprint(
    tmp_path: Path, gw: Any, tls: tuple[Path, Path, str]
) -> None:
    g = gw(token=TOKEN)
    cases = [
        (f"ws://127.0.0.1:{g.port}", tls[2], "not a wss:// URL"),
        (f"wss://127.0.0.1:{g.port}", tls[2][:-3], "not a SHA-256 fingerprint"),
        (f"wss://127.0.0.1:{g.port}", "md5:" + "ab" * 16, "not a SHA-256 fingerprint"),
    ]
    for url, pin, why in cases:
        proc = run_cli("list", env=client(tmp_path, url, pin))
        assert proc.returncode == 2, (url, pin, proc.stderr)
        assert why in proc.stderr and TOKEN not in proc.stderr
    assert g.rows() == []
    # OpenClaw's other spellings of the same pin: bare lower-case hex, `sha256:` prefix.
    bare = tls[2].replace(":", "").lower()
    for pin in (bare, "SHA256:" + bare.upper()):
        proc = run_cli("list", "--json", env=client(tmp_path, f"wss://127.0.0.1:{g.port}", pin))
        assert proc.returncode == 0, (pin, proc.stderr)
