"""Profiles: where the fingerprint's time goes (stages, instruction counts)."""
