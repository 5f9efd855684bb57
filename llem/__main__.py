"""``python -m llem``."""

import sys

from llem.app.entrypoint import main

if __name__ == "__main__":
    sys.exit(main())
