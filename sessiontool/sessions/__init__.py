"""The read side over every agent's store, whatever its format: the reader chosen per agent
(`reading`), what the user typed resolved to one session (`resolve`), and the `list` and
`history` results (`listing`, `history`), shaped as OpenClaw's sessions_list /
sessions_history return them. Runs, the session tools and the commands read through here."""
