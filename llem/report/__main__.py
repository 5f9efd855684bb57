"""``python -m llem.report DIR [DIR ...] [--out DIR]``: (re)build a sweep's table and plots.

Exit codes: 0 the report was written (even when some runs failed: their rows say so); 2 usage
error, e.g. a directory that holds no runs (one ``error:`` line and a ``hint:``); 1 unexpected
error (with a traceback).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import List, Optional

from llem.errors import EXIT_OK, EXIT_UNEXPECTED, LlemError

log = logging.getLogger("llem.report")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m llem.report",
        description="Build results.csv, results.parquet, summary.csv and plots/ for llem runs: "
        "a sweep directory, a single run directory, or several sweeps merged.",
    )
    p.add_argument(
        "dirs",
        nargs="+",
        type=Path,
        metavar="DIR",
        help="sweep or run directories (searched recursively for runs)",
    )
    p.add_argument(
        "--out", type=Path, default=None, help="where to write the outputs (default: the first DIR)"
    )
    p.add_argument("--no-plots", action="store_true", help="write the tables only")
    p.add_argument(
        "--width",
        type=int,
        default=100,
        help="widest the printed table may be, in columns (default: 100)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="do not print the table")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = _parser().parse_args(argv)
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    try:
        from llem.report.build import build_report

        report = build_report(args.dirs, out=args.out, plots=not args.no_plots, width=args.width)
    except LlemError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"hint: {exc.hint}", file=sys.stderr)
        return exc.exit_code
    except Exception:
        log.exception("unexpected error while building the report")
        return EXIT_UNEXPECTED
    if not args.quiet:
        print(report.text)
        tables = [f.name for f in report.files if f.parent == report.out_dir]
        n_plots = len(report.files) - len(tables)
        plots = f" and {n_plots} plot{'s' if n_plots != 1 else ''} in plots/" if n_plots else ""
        print(f"\nwrote {', '.join(tables)}{plots} to {report.out_dir}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
