"""Generate a linear repository with a known transition: python -m benchmarks.genrepo DIR ..."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.lib.repos import make_repo  # noqa: E402


def parse_ranges(text: str) -> set[int]:
    out: set[int] = set()
    for part in filter(None, text.split(",")):
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("dest", type=Path)
    ap.add_argument("--commits", type=int, default=500)
    ap.add_argument("--transition", type=int, default=313,
                    help="index of the first commit with the new behaviour")
    ap.add_argument("--unbuildable", default="", help="index ranges, e.g. 100-119,280-289")
    args = ap.parse_args()
    shas = make_repo(args.dest, args.commits, args.transition, parse_ranges(args.unbuildable))
    print(f"{args.dest}: {len(shas)} commits; first new-behaviour commit "
          f"{shas[args.transition]} (index {args.transition})")


if __name__ == "__main__":
    main()
