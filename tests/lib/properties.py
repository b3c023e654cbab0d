"""How many examples a property test draws: its own number in CI, a tenth (at least 5) in
the one-minute loop (`scripts/test.sh --fast` sets HYPOTHESIS_PROFILE=dev)."""
from __future__ import annotations

import os

DEV = os.environ.get("HYPOTHESIS_PROFILE") == "dev"


def examples(n: int) -> int:
    return max(5, n // 10) if DEV else n
