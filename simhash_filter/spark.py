"""Moved to :mod:`simhash_filter.batch.spark`: this old path warns and is removed in 0.3.0 (see ``_moved.py``)."""

from simhash_filter._moved import follow

follow("simhash_filter.spark", run_as_main=__name__ == "__main__")
