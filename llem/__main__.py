"""``python -m llem``."""

import sys

from llem.main import main

if __name__ == "__main__":
    sys.exit(main())
