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
from typing import Any, NoReturn

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
    _tracker_options(p)
    return p


def _tracker_options(p: argparse.ArgumentParser) -> None:
    """--to-mlflow and --to-wandb, with the options each takes."""
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
    p.add_argument(
        "--to-wandb",
        action="store_true",
        help="log each DIR (a finished sweep or run) to Weights & Biases instead of building the "
        "report: a group per sweep, a run per point not logged yet (needs 'llem[tracking]'); "
        "the API key from WANDB_API_KEY only",
    )
    p.add_argument(
        "--project",
        default=None,
        help="with --to-wandb: the W&B project (default: the one DIR was logged to)",
    )
    p.add_argument("--entity", default=None, help="with --to-wandb: the W&B entity")
    p.add_argument(
        "--wandb-mode",
        choices=("offline", "online"),
        default=None,
        help="with --to-wandb: offline writes the runs under DIR/wandb for `wandb sync` "
        "(default: the mode DIR was logged with, else WANDB_MODE, else online)",
    )


def _to_tracker(args: argparse.Namespace) -> int:
    """``--to-mlflow`` or ``--to-wandb``: each DIR logged; the tracker's refusal one line."""
    from llem.tracking.tracker import upload

    for directory in args.dirs:
        if not directory.is_dir():
            raise ConfigError(f"{directory}: no such directory")
        t = _tracking_of(args, directory)
        where = f"MLflow at {t.uri}" if args.to_mlflow else f"W&B project {t.project}"
        try:
            from llem.tracking.make import tracker_for

            print(upload(tracker_for(t), directory))
        except Exception as exc:  # the tracker's own errors, said in one line
            text = str(exc).strip().splitlines()
            raise PreflightError(
                [f"{where}: {type(exc).__name__}: {text[0] if text else ''}"[:400]],
                hint="is the tracker up, and reachable from here?",
            ) from exc
    return EXIT_OK


def _tracking_of(args: argparse.Namespace, directory: Path) -> Any:
    """The tracking section for ``directory``: the options, else what it was logged to."""
    from llem.config.tracking import TrackerKind, TrackingConfig, WandbMode, tracking_problems
    from llem.tracking.state import read_section, read_state

    if args.to_mlflow:
        state = read_state(directory)
        t = TrackingConfig(TrackerKind.mlflow, timeout_s=30.0)
        t.uri = args.tracking_uri or (state.uri if state is not None else None)
        t.experiment = args.experiment or (state.experiment if state is not None else "llem")
    else:
        logged = read_section(directory, "wandb")
        t = TrackingConfig(TrackerKind.wandb, timeout_s=30.0)
        t.project = args.project or logged.get("project")
        t.entity = args.entity or logged.get("entity")
        mode = args.wandb_mode or logged.get("mode")
        t.mode = WandbMode(mode) if mode else None
    problems = tracking_problems(t)
    if problems:
        raise ConfigError(problems)
    return t


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
    if args.to_mlflow and args.to_wandb:
        raise ConfigError("command line: --to-mlflow and --to-wandb: give one at a time")
    return _to_tracker(args) if args.to_mlflow or args.to_wandb else _report(args)


def _usage_error(message: str) -> NoReturn:
    raise ConfigError(f"command line: {message}", hint="python -m llem.report --help")


if __name__ == "__main__":
    sys.exit(main())
