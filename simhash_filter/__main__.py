"""``python -m simhash_filter``: the ``simhash-filter`` command line."""

import sys

from simhash_filter.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
