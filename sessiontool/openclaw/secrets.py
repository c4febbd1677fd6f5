"""The gateway's shared secret as OpenClaw's own CLI resolves it, so that sessiontool can present
it itself instead of leaving that to a Node process per call.

`gateway.auth.mode` picks the secret (`token`, default, or `password`; `none` needs none); the
value is OPENCLAW_GATEWAY_TOKEN / OPENCLAW_GATEWAY_PASSWORD, else `gateway.auth.token` /
`.password` from the config: a literal, the `${VAR}` / `$VAR` shorthand, or a SecretRef
`{source: env|file|exec, provider, id}` backed by `secrets.providers` (docs/gateway/secrets/
secretref-contract.md). `store` refs live in OpenClaw's own database: refused with how to pass
the secret instead.

A resolved secret never leaves this process except inside the `connect` frame: never on a
command line, in a record, a log or an error message (errors name the config key, not the value).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sessiontool.errors import ConfigError, ForbiddenError

ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]{0,127}$")
SHORTHAND = re.compile(r"^\$\{?([A-Z][A-Z0-9_]{0,127})\}?$")
EXEC_TIMEOUT_S = 5.0
EXEC_TIMEOUT_MAX_MS = 120_000  # OpenClaw's own bound on an exec provider's timeoutMs


@dataclass(frozen=True)
class Secret:
    """Which field carries the secret (`token` or `password`) and where it came from (for doctor,
    never the value)."""

    field: str
    value: str
    source: str

    def __repr__(self) -> str:  # a traceback or a debug print must not show the value
        return f"Secret(field={self.field!r}, source={self.source!r})"


def resolve(gw: dict[str, Any], cfg: dict[str, Any], config_path: Path | None) -> Secret | None:
    """The shared secret for this gateway section, or None (auth mode `none`, or none set)."""
    auth = gw.get("auth") if isinstance(gw.get("auth"), dict) else {}
    assert isinstance(auth, dict)
    mode = auth.get("mode")
    if mode == "none":
        return None
    order = ("password", "token") if mode == "password" else ("token", "password")
    for field in order:
        env_name = f"OPENCLAW_GATEWAY_{field.upper()}"
        env_value = os.environ.get(env_name, "")
        if env_value:
            return Secret(field, env_value, f"env {env_name}")
        raw = auth.get(field)
        if raw is None or raw == "":
            continue
        where = f"gateway.auth.{field}"
        value = _value(raw, where, cfg, config_path)
        if value:
            return Secret(field, value, f"config {where}" + _ref_kind(raw))
        if mode in ("token", "password"):
            break
    return None


def _ref_kind(raw: Any) -> str:
    if isinstance(raw, dict):
        return f" (SecretRef {raw.get('source')})"
    if isinstance(raw, str) and SHORTHAND.match(raw.strip()):
        return " (env shorthand)"
    return ""


def _value(raw: Any, where: str, cfg: dict[str, Any], config_path: Path | None) -> str:
    if isinstance(raw, str):
        m = SHORTHAND.match(raw.strip())
        if m:
            return _env(m.group(1), where)
        return raw
    if not isinstance(raw, dict):
        raise ForbiddenError(f"{where} in OpenClaw's config is neither a string nor a SecretRef")
    source, ref_id = raw.get("source"), raw.get("id")
    if not isinstance(ref_id, str) or not ref_id:
        raise ForbiddenError(f"{where}: a SecretRef without an id")
    provider_name = raw.get("provider") if isinstance(raw.get("provider"), str) else None
    provider_name = _alias(cfg, str(source), provider_name)
    provider = _provider(cfg, str(source), provider_name)
    if source == "env":
        allow = provider.get("allowlist") if provider else None
        if isinstance(allow, list) and ref_id not in allow:
            raise ForbiddenError(f"{where}: env {ref_id} is not in its provider's allowlist")
        return _env(ref_id, where)
    if source == "file":
        if provider is None:
            raise ForbiddenError(f"{where}: no `file` provider in secrets.providers")
        return _file(provider, ref_id, where, config_path)
    if source == "exec":
        if provider is None:
            raise ForbiddenError(f"{where}: no `exec` provider in secrets.providers")
        setting = _ExecSetting(provider_name, config_path)
        return _exec(provider, provider_name, ref_id, where=where, setting=setting)
    raise ForbiddenError(
        f"{where} is a SecretRef of source {source!r}, which only OpenClaw itself reads; "
        "set OPENCLAW_GATEWAY_TOKEN (or OPENCLAW_GATEWAY_PASSWORD) for sessiontool"
    )


def _section(cfg: dict[str, Any], name: str) -> dict[str, Any]:
    sec = cfg.get("secrets")
    value = sec.get(name) if isinstance(sec, dict) else None
    return value if isinstance(value, dict) else {}


def _alias(cfg: dict[str, Any], source: str, name: str | None) -> str:
    """The provider a SecretRef names: its own `provider`, else `secrets.defaults.<source>`."""
    default = _section(cfg, "defaults").get(source)
    return name or (default if isinstance(default, str) and default else "default")


def _provider(cfg: dict[str, Any], source: str, alias: str) -> dict[str, Any] | None:
    p = _section(cfg, "providers").get(alias)
    if isinstance(p, dict) and p.get("source") == source:
        return p
    return None


def _env(name: str, where: str) -> str:
    if not ENV_NAME.match(name):
        raise ForbiddenError(f"{where}: {name!r} is not an environment variable name")
    value = os.environ.get(name, "")
    if not value:
        raise ForbiddenError(f"{where} names env {name}, which is not set")
    return value


def _file(provider: dict[str, Any], ref_id: str, where: str, config_path: Path | None) -> str:
    raw_path = provider.get("path")
    if not isinstance(raw_path, str) or not raw_path:
        raise ForbiddenError(f"{where}: its file provider has no path")
    path = Path(os.path.expanduser(raw_path))
    if not path.is_absolute() and config_path is not None:
        path = config_path.parent / path
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ForbiddenError(f"{where}: cannot read its secrets file {path}: {exc}") from exc
    if provider.get("mode") == "singleValue":
        return text.rstrip("\n")
    try:
        node: Any = json.loads(text)
    except ValueError as exc:
        raise ForbiddenError(f"{where}: its secrets file {path} is not JSON") from exc
    if not ref_id.startswith("/"):
        raise ForbiddenError(f"{where}: a file SecretRef id must be a JSON pointer (/...)")
    for part in ref_id[1:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            raise ForbiddenError(f"{where}: {ref_id} is not in {path}")
        node = node[part]
    if not isinstance(node, str):
        raise ForbiddenError(f"{where}: {ref_id} in {path} is not a string")
    return node


@dataclass(frozen=True)
class _ExecSetting:
    """Words a bad setting of an exec provider as a config error (exit 2) naming the file and
    the key (`<file>: secrets.providers.<name>.<key>`): JSON5 lets `timeoutMs` be Infinity, NaN
    or 1e308, and `args`, `env` or `passEnv` be anything at all."""

    provider: str
    config_path: Path | None

    def bad(self, key: str, expected: str, value: Any) -> ConfigError:
        file = f"{self.config_path}: " if self.config_path is not None else ""
        return ConfigError(
            f"{file}secrets.providers.{self.provider}.{key}: expected {expected}, got {value!r}"
        )

    def strings(self, provider: dict[str, Any], key: str) -> list[str]:
        value = provider.get(key)
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
            raise self.bad(key, "an array of strings", value)
        return value

    def timeout_s(self, provider: dict[str, Any]) -> float:
        value = provider.get("timeoutMs")
        if value is None:
            return EXEC_TIMEOUT_S
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or isinstance(value, float)
            and not value.is_integer()  # NaN and the infinities too
            or not 1 <= value <= EXEC_TIMEOUT_MAX_MS
        ):
            raise self.bad(
                "timeoutMs",
                f"a whole number of milliseconds from 1 to {EXEC_TIMEOUT_MAX_MS}",
                value,
            )
        return value / 1000


def _exec(
    provider: dict[str, Any], name: str, ref_id: str, where: str, setting: _ExecSetting
) -> str:
    import subprocess

    command = provider.get("command")
    if not isinstance(command, str) or not os.path.isabs(command):
        raise ForbiddenError(f"{where}: its exec provider needs an absolute `command`")
    args = setting.strings(provider, "args")
    raw_env = provider.get("env")
    if raw_env is not None and not (
        isinstance(raw_env, dict) and all(isinstance(v, str) for v in raw_env.values())
    ):
        raise setting.bad("env", "an object of strings", raw_env)
    env = dict(raw_env or {})
    for k in setting.strings(provider, "passEnv"):
        if k in os.environ:
            env[k] = os.environ[k]
    timeout_s = setting.timeout_s(provider)
    request = json.dumps({"protocolVersion": 1, "provider": name, "ids": [ref_id]})
    try:
        proc = subprocess.run(
            [command, *args],
            input=request,
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout_s,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ForbiddenError(f"{where}: its exec provider {command} failed: {exc}") from exc
    if proc.returncode != 0:
        raise ForbiddenError(f"{where}: its exec provider {command} exited {proc.returncode}")
    out = proc.stdout.strip()
    try:
        data = json.loads(out)
    except ValueError:
        if provider.get("jsonOnly") is False and out:
            return out
        raise ForbiddenError(f"{where}: its exec provider did not answer JSON") from None
    values = data.get("values") if isinstance(data, dict) else None
    value = values.get(ref_id) if isinstance(values, dict) else None
    if not isinstance(value, str) or not value:
        raise ForbiddenError(f"{where}: its exec provider has no value for {ref_id}")
    return value
