"""Test doubles that speak real protocols over real sockets (no mocking of our own code)."""
