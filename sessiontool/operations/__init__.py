"""The operations the commands and the MCP server call: session management (`manage`),
`doctor`, `repair` and `export`. Each returns plain data and raises SessiontoolError; the run
engine (`runs/`) and the read side (`sessions/`) are below, the CLI above."""
