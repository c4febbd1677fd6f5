"""What happens around a run: agent-to-agent turns, announce, delivery, policies, archive, tools."""
