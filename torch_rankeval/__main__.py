"""``python -m torch_rankeval``: the ``torch-rankeval`` command line (see :mod:`torch_rankeval.cli`)."""

import sys

from torch_rankeval.cli import main

sys.exit(main())
