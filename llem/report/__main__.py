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
from typing import NoReturn

from llem.app.boundary import guard
from llem.errors import EXIT_OK, ConfigError, PreflightError

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
        "--include-invalid",
        action="store_true",
        help="keep runs whose energy was judged invalid (valid=false) in the energy statistics "
        "(default: left out, and counted in summary.csv's n_energy_left_out)",
    )
    p.add_argument(
        "--width",
        type=int,
        default=100,
        help="widest the printed table may be, in columns (default: 100)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="do not print the table")
    p.add_argument(
        "--to-mlflow",
        action="store_true",
        help="log each DIR (a finished sweep or run) to MLflow instead of building the report: "
        "a parent run per sweep, a child per point not logged yet (needs 'llem[tracking]')",
    )
    p.add_argument(
        "--tracking-uri",
        default=None,
        help="with --to-mlflow: the tracking server (default: the one DIR was logged to, else "
        "MLFLOW_TRACKING_URI); credentials from MLflow's own environment variables only",
    )
    p.add_argument(
        "--experiment",
        default=None,
        help="with --to-mlflow: the experiment (default: the one DIR was logged to, else llem)",
    )
    return p


def _to_mlflow(args: argparse.Namespace) -> int:
    from llem.config.tracking import TrackerKind, TrackingConfig, tracking_problems

    problems = tracking_problems(TrackingConfig(TrackerKind.mlflow, args.tracking_uri))
    if problems:
        raise ConfigError(problems)
    from llem.tracking.state import read_state
    from llem.tracking.upload import upload

    for directory in args.dirs:
        if not directory.is_dir():
            raise ConfigError(f"{directory}: no such directory")
        state = read_state(directory)
        uri = args.tracking_uri or (state.uri if state is not None else None)
        experiment = args.experiment or (state.experiment if state is not None else "llem")
        try:
            print(upload(directory, uri, experiment, timeout_s=30.0))
        except Exception as exc:  # the tracker's own errors, said in one line
            text = str(exc).strip().splitlines()
            raise PreflightError(
                [f"MLflow at {uri}: {type(exc).__name__}: {text[0] if text else ''}"[:400]],
                hint="is the tracking server up, and reachable from here?",
            ) from exc
    return EXIT_OK


def _report(args: argparse.Namespace) -> int:
    from llem.report.build import build_report

    report = build_report(
        args.dirs,
        out=args.out,
        plots=not args.no_plots,
        width=args.width,
        include_invalid=args.include_invalid,
    )
    if not args.quiet:
        print(report.text)
        tables = [f.name for f in report.files if f.parent == report.out_dir]
        n_plots = len(report.files) - len(tables)
        plots = f" and {n_plots} plot{'s' if n_plots != 1 else ''} in plots/" if n_plots else ""
        print(f"\nwrote {', '.join(tables)}{plots} to {report.out_dir}")
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    parser.error = _usage_error  # type: ignore[method-assign]
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    return guard(lambda: _dispatch(parser.parse_args(argv)))


def _dispatch(args: argparse.Namespace) -> int:
    return _to_mlflow(args) if args.to_mlflow else _report(args)


def _usage_error(message: str) -> NoReturn:
    raise ConfigError(f"command line: {message}", hint="python -m llem.report --help")


if __name__ == "__main__":
    sys.exit(main())
