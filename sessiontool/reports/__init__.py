"""What sessiontool's own index (sessiontool/index/) answers about every transcript: `search`
(message text), `usage` (tokens and cost) and the budgets over them; `site`, the HTML export."""
