"""`python -m helpers ...`: see `helpers.cli`."""

import sys

from helpers.cli import main

if __name__ == "__main__":
    sys.exit(main())
