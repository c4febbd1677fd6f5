"""sessiontool: OpenClaw's agent session tools over a local state directory."""

# The one place the version is said (pyproject reads it). It follows CHANGELOG.md: a change that
# breaks a pinned `--json` contract (tests/test_json_contracts.py) or the run-record format is a
# minor bump while below 1.0, anything else a patch.
__version__ = "0.3.0"

# The peers the interop suites run against (tests/interop, tests/interop_openclaw; .ci/run
# installs exactly these), named by `--version`.
TESTED_WITH = "OpenClaw 2026.9.6 and 2026.7.35, Clawdbot 2026.1.24-3"
