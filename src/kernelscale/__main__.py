"""``python -m kernelscale``: the ``kernelscale`` command (:mod:`kernelscale.cli`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
