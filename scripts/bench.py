"""The benchmark harness's old entry point: ``python scripts/bench.py --mode ... --seeds 3``.

The harness is the package ``benchmarks/`` (``python -m benchmarks``); this forwards to it.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli import main  # noqa: E402

if __name__ == "__main__":
    main()
