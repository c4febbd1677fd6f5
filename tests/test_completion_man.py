"""Shell completion and the man page: the committed generated files equal a fresh generation,
the scripts are valid, completion of keys and run ids reads the state dir (with real bash, colons
and all), and the man page renders."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT, run_cli

from .runhelpers import NOW, write_store

REGEN = "scripts/regen-docs"
COMPLETIONS = ROOT / "completions"
MAN = ROOT / "man" / "sessiontool.1"
SHELL_FILES = {"bash": "sessiontool.bash", "zsh": "_sessiontool", "fish": "sessiontool.fish"}
GROUP = "agent:main:discord:group:42"
KEYS = ["agent:main:main", "agent:main:cron:nightly", "agent:main:discord:group:42", "cron:legacy"]


@pytest.fixture
def keyed(state: Path) -> Path:
    write_store(
        state, {k: {"sessionId": f"id-{i}", "updatedAt": NOW - i} for i, k in enumerate(KEYS)}
    )
    write_store(state, {"agent:ops:main": {"sessionId": "ops-1", "updatedAt": NOW}}, agent="ops")
    runs = state / "sessiontool" / "runs"
    runs.mkdir(parents=True)
    for rid in (
        "0a1b2c3d-0000-4000-8000-000000000001",
        "0a1b2c3d-0000-4000-8000-000000000002",
        "ffff0000-0000-4000-8000-000000000003",
    ):
        (runs / f"{rid}.json").write_text(json.dumps({"runId": rid, "status": "ok"}))
    return state


def complete_env(words: str, cword: int, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {"_SESSIONTOOL_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword)}
    )
    env.update(extra)
    return env


def complete(words: str, cword: int, **extra: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "sessiontool"],
        capture_output=True,
        text=True,
        env=complete_env(words, cword, **extra),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def real_bash(tmp_path: Path, script: str) -> subprocess.CompletedProcess[str]:
    """`script` run by bash itself, with `sessiontool` on PATH as a shell would find it."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    wrapper = bindir / "sessiontool"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m sessiontool "$@"\n')
    wrapper.chmod(0o755)
    env = dict(os.environ, PATH=f"{bindir}:{os.environ.get('PATH', '')}")
    return subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", script],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


# -- the committed copies ----------------------------------------------------------------------


def test_committed_generated_files_are_current() -> None:
    from sessiontool.cli.docs import generated_files

    stale = []
    for rel, content in generated_files().items():
        path = ROOT / rel
        if not path.is_file() or path.read_text(encoding="utf-8") != content:
            stale.append(str(rel))
    assert not stale, f"stale generated files {stale}: regenerate with `{REGEN}` and commit them"


def test_check_command_reports_stale_copies(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "sessiontool.cli.docs", "check", "--root", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert "stale: man/sessiontool.1" in proc.stderr
    assert f"regenerate with: {REGEN}" in proc.stderr
    subprocess.run(
        [sys.executable, "-m", "sessiontool.cli.docs", "write", "--root", str(tmp_path)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    assert {p.name for p in (tmp_path / "completions").iterdir()} == set(SHELL_FILES.values())
    again = subprocess.run(
        [sys.executable, "-m", "sessiontool.cli.docs", "check", "--root", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 0, again.stderr


def test_check_without_root_checks_this_checkout(tmp_path: Path) -> None:
    """`python -m sessiontool.cli.docs check` as its docstring shows it (no --root, run from
    anywhere) checks the committed copies of the checkout the module is in."""
    proc = subprocess.run(
        [sys.executable, "-m", "sessiontool.cli.docs", "check"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    from sessiontool.cli.docs import repo_root

    if (repo_root() / "pyproject.toml").is_file():  # an editable install: this checkout
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr == ""
    else:  # a wheel in site-packages has no committed copies to compare: said, exit 2
        assert proc.returncode == 2
        assert "is not a sessiontool checkout" in proc.stderr and "--root" in proc.stderr


def test_regen_script_exists_and_is_executable() -> None:
    script = ROOT / REGEN
    assert script.is_file() and os.access(script, os.X_OK)
    assert "sessiontool.cli.docs" in script.read_text()


@pytest.mark.parametrize("shell", sorted(SHELL_FILES))
def test_completion_command_prints_the_shipped_script(shell: str) -> None:
    proc = run_cli("completion", shell)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (COMPLETIONS / SHELL_FILES[shell]).read_text()
    # ... which is what the completion protocol itself hands out.
    env = dict(os.environ, _SESSIONTOOL_COMPLETE=f"source_{shell}")
    src = subprocess.run(
        [sys.executable, "-m", "sessiontool"], capture_output=True, text=True, env=env, timeout=60
    )
    assert src.returncode == 0 and src.stdout == proc.stdout


def test_completion_unknown_shell() -> None:
    proc = run_cli("completion", "tcsh")
    assert proc.returncode == 2
    assert "bash, zsh, fish" in proc.stderr


def test_script_shapes() -> None:
    zsh = (COMPLETIONS / "_sessiontool").read_text()
    assert zsh.startswith("#compdef sessiontool\n")  # autoloadable from $fpath
    assert "_SESSIONTOOL_COMPLETE=complete_zsh" in zsh
    fish = (COMPLETIONS / "sessiontool.fish").read_text()
    assert fish.startswith("complete --command sessiontool ")
    assert "_SESSIONTOOL_COMPLETE=complete_fish" in fish
    bash = (COMPLETIONS / "sessiontool.bash").read_text()
    assert "complete -o default -F _sessiontool_completion sessiontool" in bash


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
def test_bash_script_is_valid_bash() -> None:
    proc = subprocess.run(
        ["bash", "-n", str(COMPLETIONS / "sessiontool.bash")], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr


# -- completing keys and run ids ---------------------------------------------------------------


def test_bash_protocol_completes_session_keys(keyed: Path) -> None:
    got = complete("sessiontool history agent:main:", 2)
    assert got == sorted(
        [
            "agent:main:main",
            "agent:main:cron:nightly",
            "agent:main:discord:group:42",
            "agent:main:cron:legacy",
        ]
    )
    assert complete("sessiontool history agent:main:cr", 2) == [
        "agent:main:cron:legacy",
        "agent:main:cron:nightly",
    ]
    # An empty word offers `main` and every agent's keys.
    everything = complete("sessiontool delete ", 2)
    assert "main" in everything and "agent:ops:main" in everything


def test_keys_complete_for_the_manage_commands_and_state_dir_flag(
    keyed: Path, tmp_path: Path
) -> None:
    for cmd in ("label", "reset", "delete", "history"):
        assert "agent:main:cron:nightly" in complete(f"sessiontool {cmd} agent:main:c", 2), cmd
    # --state-dir on the line being completed wins over the environment.
    got = complete(
        f"sessiontool --state-dir {keyed} reset agent:o",
        4,
        SESSIONTOOL_STATE_DIR=str(tmp_path / "none"),
    )
    assert got == ["agent:ops:main"]


def test_run_ids_complete(keyed: Path) -> None:
    ours = ["0a1b2c3d-0000-4000-8000-000000000001", "0a1b2c3d-0000-4000-8000-000000000002"]
    for cmd in ("wait", "runs", "abort"):
        assert complete(f"sessiontool {cmd} 0a1b", 2) == ours, cmd
    assert complete("sessiontool wait ", 2) == [*ours, "ffff0000-0000-4000-8000-000000000003"]


def test_commands_and_shells_complete(keyed: Path) -> None:
    assert complete("sessiontool do", 1) == ["doctor"]
    assert complete("sessiontool completion ", 2) == ["bash", "zsh", "fish"]
    assert "--older-than" in complete("sessiontool prune --", 2)


def test_zsh_and_fish_protocols_escape_and_list_keys(keyed: Path) -> None:
    env = dict(
        os.environ,
        _SESSIONTOOL_COMPLETE="complete_zsh",
        _TYPER_COMPLETE_ARGS="sessiontool history agent:main:cron",
    )
    out = subprocess.run(
        [sys.executable, "-m", "sessiontool"], capture_output=True, text=True, env=env, timeout=60
    ).stdout
    assert out.startswith("_arguments")
    assert r"agent\\:main\\:cron\\:nightly" in out  # colons escaped for _arguments
    env = dict(
        os.environ,
        _SESSIONTOOL_COMPLETE="complete_fish",
        _TYPER_COMPLETE_FISH_ACTION="get-args",
        _TYPER_COMPLETE_ARGS="sessiontool reset agent:main:cron",
    )
    out = subprocess.run(
        [sys.executable, "-m", "sessiontool"], capture_output=True, text=True, env=env, timeout=60
    ).stdout
    assert out.split() == ["agent:main:cron:legacy", "agent:main:cron:nightly"]


def test_completion_stays_on_the_fast_path(keyed: Path) -> None:
    """Every Tab runs the program: completing must not import rich (nor json5)."""
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: sys.stderr.write('LOADED:' + ','.join(sorted("
        "m for m in sys.modules "
        "if m.split('.')[0] in ('rich', 'json5'))) + '\\n'))\n"
        "from sessiontool.cli.main import main\n"
        "main()\n"
    )
    for words, cword in (
        ("sessiontool history agent:main:", 2),
        ("sessiontool wait 0a", 2),
        ("sessiontool pru", 1),
        ("sessiontool prune --", 2),
    ):
        for shell_env in (
            complete_env(words, cword),
            dict(os.environ, _SESSIONTOOL_COMPLETE="complete_zsh", _TYPER_COMPLETE_ARGS=words),
        ):
            proc = subprocess.run(
                [sys.executable, "-c", code],
                capture_output=True,
                text=True,
                env=shell_env,
                timeout=60,
            )
            assert proc.returncode == 0, proc.stderr
            assert "LOADED:\n" in proc.stderr, (words, proc.stderr)


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
def test_real_bash_completes_keys_despite_colon_word_breaks(keyed: Path, tmp_path: Path) -> None:
    """What bash itself does on Tab: COMP_WORDS split at ':' (COMP_WORDBREAKS), the script's
    function called, COMPREPLY holding what replaces the current word (after the last ':')."""
    script = (
        f'source "{COMPLETIONS / "sessiontool.bash"}"\n'
        'COMP_LINE="sessiontool history agent:main:c"; COMP_POINT=${#COMP_LINE}\n'
        "COMP_WORDS=(sessiontool history agent : main : c); COMP_CWORD=6\n"
        "_sessiontool_completion sessiontool\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
        "echo ---\n"
        'COMP_LINE="sessiontool reset "; COMP_POINT=${#COMP_LINE}\n'
        'COMP_WORDS=(sessiontool reset ""); COMP_CWORD=2\n'
        "_sessiontool_completion sessiontool\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
        "complete -p sessiontool\n"
    )
    proc = real_bash(tmp_path, script)
    assert proc.returncode == 0, proc.stderr
    first, second = proc.stdout.split("---\n")
    assert first.split() == ["cron:legacy", "cron:nightly"]
    assert "main" in second.split() and "agent:main:discord:group:42" in second.split()
    assert "complete -o default -F _sessiontool_completion sessiontool" in second


# -- the man page ------------------------------------------------------------------------------


def _command_tree() -> dict[str, list[str]]:
    """Command name → its option names, from the live Typer app."""
    import typer

    from sessiontool.cli.app import app
    from sessiontool.cli.commands import register_all

    register_all()

    root = typer.main.get_command(app)
    ctx = typer.Context(root, info_name="sessiontool")
    out = {}
    for name in root.list_commands(ctx):
        cmd = root.get_command(ctx, name)
        assert cmd is not None
        out[name] = [
            o
            for p in cmd.params
            if p.param_type_name == "option" and p.name != "help"
            for o in p.opts
        ]
    return out


def test_man_page_structure() -> None:
    text = MAN.read_text()
    assert text.startswith("'\\\" t\n")  # tells man to run tbl for the exit-status table
    sections = re.findall(r"^\.SH (.+)$", text, re.M)
    assert sections == [
        "NAME",
        "SYNOPSIS",
        "DESCRIPTION",
        "GLOBAL OPTIONS",
        "COMMANDS",
        "ENVIRONMENT",
        "FILES",
        "EXIT STATUS",
        "EXAMPLES",
        "SEE ALSO",
    ]
    assert re.search(r"^sessiontool \\- ", text, re.M)
    documented = re.findall(r'^\.SS "(.+)"$', text, re.M)
    for name in (
        "list",
        "history",
        "label",
        "reset",
        "delete",
        "paths",
        "doctor",
        "prune",
        "completion",
    ):
        assert name in documented
    for var in (
        "SESSIONTOOL_STATE_DIR",
        "SESSIONTOOL_CONFIG",
        "SESSIONTOOL_SESSION_KEY",
        "SESSIONTOOL_SANDBOXED",
        "SESSIONTOOL_NOW_MS",
        "SESSIONTOOL_DEBUG",
        "NO_COLOR",
    ):
        assert f"\\fB{var}\\fR" in text
    from sessiontool.errors import ExitCode

    for code in ExitCode:
        assert re.search(rf"^{int(code)}@T\{{$", text, re.M), code
    assert all(ord(c) < 128 for c in text)  # renders the same with or without preconv


def test_man_page_documents_every_command_and_option() -> None:
    from sessiontool.cli.docs import man_page

    page = man_page()
    for name, options in _command_tree().items():
        assert f'.SS "{name}"' in page, name
        for opt in options:
            assert "\\fB" + opt.replace("-", "\\-") + "\\fR" in page, (name, opt)


@pytest.mark.skipif(shutil.which("man") is None, reason="man not installed")
def test_man_renders_with_man(tmp_path: Path) -> None:
    env = dict(
        os.environ,
        MANWIDTH="100",
        MANPAGER="cat",
        PAGER="cat",
        LC_ALL="C.UTF-8",
        HOME=str(tmp_path),
    )
    proc = subprocess.run(
        ["man", "-l", str(MAN)], capture_output=True, text=True, env=env, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    out = re.sub(r".\x08", "", proc.stdout)  # strip overstrike bold/underline if any
    assert "SESSIONTOOL(1)" in out
    for heading in (
        "NAME",
        "SYNOPSIS",
        "COMMANDS",
        "ENVIRONMENT",
        "FILES",
        "EXIT STATUS",
        "EXAMPLES",
    ):
        assert re.search(rf"^{heading}$", out, re.M), heading
    assert re.search(r"^\s+124\s+the caller stopped waiting", out, re.M)
    assert "sessiontool prune [OPTIONS]" in out
    assert "--older-than D" in out


@pytest.mark.skipif(shutil.which("groff") is None, reason="groff not installed")
def test_man_page_has_no_groff_warnings() -> None:
    proc = subprocess.run(
        ["groff", "-man", "-t", "-ww", "-z", str(MAN)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0
    assert proc.stderr == ""


def test_global_options_are_worded_once_for_man_help_and_readme(tmp_path: Path) -> None:
    """Where global options go has one wording (app.GLOBAL_OPTIONS_NOTE), carried by the man
    page, `--help` and the README; and what it says is what the program does."""
    from sessiontool.cli.app import GLOBAL_OPTIONS_NOTE
    from sessiontool.cli.docs import roff

    assert "before or after the command" in GLOBAL_OPTIONS_NOTE
    page = MAN.read_text()
    assert roff(GLOBAL_OPTIONS_NOTE, hyphens=True) in page
    assert "go before the command" not in page
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert GLOBAL_OPTIONS_NOTE in readme
    helptext = " ".join(re.sub(r"[│╭╮╰╯─]", " ", run_cli("--help").stdout).split())
    assert GLOBAL_OPTIONS_NOTE in helptext
    other = tmp_path / "elsewhere"
    before = run_cli("--state-dir", str(other), "--json", "paths")
    after = run_cli("paths", "--state-dir", str(other), "--json")
    assert before.returncode == after.returncode == 0
    assert before.stdout == after.stdout and str(other) in after.stdout


@pytest.mark.slow  # builds a wheel (pip, setuptools): ~20 s
def test_pip_install_puts_the_man_page_where_man_finds_it(tmp_path: Path) -> None:
    """`pip install .` installs man/sessiontool.1 as <prefix>/share/man/man1/sessiontool.1,
    which `man` finds from <prefix>/bin on PATH (a venv included)."""
    import zipfile

    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
        # pip's own DeprecationWarnings (an older pip's pkg_resources) are not ours to fail on.
        env={k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"},
    )
    assert proc.returncode == 0, proc.stderr
    (wheel,) = tmp_path.glob("sessiontool-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = [n for n in zf.namelist() if n.endswith("/data/share/man/man1/sessiontool.1")]
        assert len(names) == 1, zf.namelist()
        assert zf.read(names[0]).decode() == MAN.read_text()


def test_real_bash_completes_a_label_with_a_space_as_one_word(state: Path, tmp_path: Path) -> None:
    write_store(
        state,
        {
            "agent:main:telegram:group:7": {
                "sessionId": "a",
                "updatedAt": NOW,
                "label": "tg seven",
            },
            "agent:main:cron:x": {"sessionId": "b", "updatedAt": NOW, "label": "nightly"},
        },
    )
    script = f'source "{COMPLETIONS / "sessiontool.bash"}"\n'
    for typed in ("sessiontool history --label tg", "sessiontool history --label tg\\ s"):
        script += (
            f"COMP_LINE='{typed}'; COMP_POINT=${{#COMP_LINE}}\n"
            "_sessiontool_completion sessiontool\n"
            # what the line becomes once bash has put the completion in: one word for the label
            'eval "set -- ${COMPREPLY[0]}"; printf "%s|%s\\n" "$#" "$1"\n'
        )
    proc = real_bash(tmp_path, script)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["1|tg seven", "1|tg seven"]
    proc = run_cli("history", "--label", "tg seven")  # and the label, so given, is found
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
def test_completion_offers_main_once_and_option_values(state: Path) -> None:
    assert run_cli("send", "main", "x").returncode == 0
    assert run_cli("send", GROUP, "x").returncode == 0
    keys = complete("sessiontool history ", 2)
    assert keys.count("main") == 1 and "agent:main:main" not in keys
    assert GROUP in keys
    assert complete("sessiontool list --kinds g", 3) == ["group"]
    assert complete("sessiontool history main --format j", 4) == ["json", "jsonl"]
    assert sorted(complete("sessiontool --color a", 2)) == ["always", "auto"]
    assert complete("sessiontool spawn x --cleanup ", 4) == ["keep", "delete"]
    assert complete("sessiontool policy main ", 3) == ["allow", "deny", "inherit", "on", "off"]
