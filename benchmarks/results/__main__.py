"""``python -m benchmarks.results {run,page}``: see :mod:`benchmarks.results`."""

import sys

from benchmarks.results.cli import main

sys.exit(main())
