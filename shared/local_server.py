"""Fixtures that run memorysync-local embedded and served on loopback."""
