"""Data: generated samples, pairs, WARC files and duplicate floods the benchmarks, tests and demos use."""
