"""sessiontool: OpenClaw's agent session tools over a local state directory."""

__version__ = "0.1.0"
