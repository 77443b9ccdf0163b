"""Benchmarks, by what they measure (README.md lists every script and the docs page that quotes it).

Run them as modules from the repository root: ``python -m benchmarks.speed.bench_fingerprint``."""
