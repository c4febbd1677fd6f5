"""What sessiontool's own index answers about every transcript: `search` (message text) and
`usage` (tokens and cost), and `catalog`, the one place they learn which transcripts count."""
