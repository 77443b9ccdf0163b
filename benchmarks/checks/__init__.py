"""Checks: the golden fingerprints and integration runs (Scrapyd) that guard behaviour, not speed."""
