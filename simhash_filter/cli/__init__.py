"""The command line, ``simhash-filter``: ``main`` parses the arguments and runs ``fingerprint``, ``compare``
and ``dedup``; ``index`` holds the ``index`` subcommands.
"""
