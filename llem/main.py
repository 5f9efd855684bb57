"""``python -m llem``: the Hydra entrypoint and the one boundary that turns errors into exit codes.

Exit codes: 0 all runs ok, 2 configuration error, 3 pre-flight failure, 4 one or more runs of a
sweep failed, 1 unexpected error (with a traceback in llem.log and on stderr).
"""

from __future__ import annotations

import contextlib
import io
import logging
import shutil
import sys
import traceback
from pathlib import Path
from typing import Any, Dict, List, Optional

import hydra
from omegaconf import DictConfig

from llem.config.store import register_configs
from llem.errors import (
    EXIT_CONFIG,
    EXIT_OK,
    EXIT_PREFLIGHT,
    EXIT_SWEEP_FAILED,
    EXIT_UNEXPECTED,
    ConfigError,
    LlemError,
    PreflightError,
)

log = logging.getLogger("llem")

# What happened in this process: set by the task function (and by llem's sweeper).
STATE: Dict[str, Any] = {"task_started": False, "multirun": False, "outcomes": []}


class _StderrGate(io.TextIOBase):
    """Holds back stderr until the first run starts.

    Hydra reports composition errors (unknown key, bad type, unknown option) as several lines
    and exits 1. Holding its output lets ``main`` rewrite such a report as one ``error:`` line
    with exit code 2.
    Once a run starts, everything passes straight through.
    """

    def __init__(self, real: Any) -> None:
        self.real = real
        self.buffer_text: List[str] = []
        self.open = False

    def write(self, s: str) -> int:
        if self.open:
            return self.real.write(s)
        self.buffer_text.append(s)
        return len(s)

    def flush(self) -> None:
        if self.open:
            self.real.flush()

    def release(self) -> None:
        if not self.open:
            self.open = True
            self.real.write("".join(self.buffer_text))
            self.buffer_text.clear()

    def held(self) -> str:
        return "".join(self.buffer_text)

    def isatty(self) -> bool:
        return bool(self.real.isatty())

    def fileno(self) -> int:
        return int(self.real.fileno())

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def condense_hydra_error(text: str) -> str:
    """Hydra's multi-line composition error as one line that keeps the key, value and options."""
    if "Traceback (most recent call last)" in text:
        last = [line.strip() for line in text.splitlines() if line.strip()][-1]
        return last
    parts: List[str] = []
    options: List[str] = []
    options_head: Optional[str] = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("Set the environment variable HYDRA_FULL_ERROR"):
            continue
        if line.startswith(("full_key:", "reference_type=", "object_type=")):
            continue
        if line.startswith("Config search path:"):
            break
        if line.startswith("Available options in"):
            options_head = line.rstrip(":").replace("Available", "available")
            continue
        if options_head is not None and raw.startswith(("\t", " ")):
            options.append(line)
            continue
        parts.append(line.rstrip("."))
    if options_head:
        parts.append(f"{options_head}: {', '.join(options)}")
    return "; ".join(parts) or "invalid command line"


def _print_error(exc: LlemError) -> None:
    problems = getattr(exc, "problems", [])
    if len(problems) > 1:
        what = (
            "pre-flight checks failed"
            if isinstance(exc, PreflightError)
            else "configuration errors"
        )
        lines = [f"error: {len(problems)} {what}:"] + [f"  - {p}" for p in problems]
        print("\n".join(lines), file=sys.stderr)
    else:
        print(f"error: {exc.message}", file=sys.stderr)
    if exc.hint:
        print(f"hint: {exc.hint}", file=sys.stderr)


def _discard_run_dir(run_dir: Path) -> None:
    """Remove a run directory that holds no result (a config or pre-flight error stopped it)."""
    if run_dir.is_dir() and not (run_dir / "result.json").exists():
        shutil.rmtree(run_dir, ignore_errors=True)
        with contextlib.suppress(OSError):
            run_dir.parent.rmdir()  # the date folder, when this run was its only content


def _hash_or_none(cfg: DictConfig) -> Optional[str]:
    """The config hash of a point that stopped before running (None if it is not valid)."""
    from llem.config.validate import config_hash
    from llem.run import prepare

    try:
        return config_hash(prepare(cfg))
    except LlemError:
        return None


def task(cfg: DictConfig) -> Dict[str, Any]:
    """The body of every Hydra job: one run, its errors turned into exit codes or outcomes."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from llem.result import utc_now, write_result
    from llem.run import run, summary_line

    STATE["task_started"] = True
    if isinstance(sys.stderr, _StderrGate):
        sys.stderr.release()
    hc = HydraConfig.get()
    multirun = hc.mode == RunMode.MULTIRUN
    STATE["multirun"] = multirun
    run_dir = Path(hc.runtime.output_dir)
    overrides = list(hc.overrides.task)
    outcome: Dict[str, Any] = {"run_dir": str(run_dir), "overrides": overrides}
    try:
        result = run(cfg, run_dir, overrides, reuse_model=multirun and bool(cfg.sweep.reuse_model))
    except (ConfigError, PreflightError) as exc:
        if not multirun:
            _print_error(exc)
            _discard_run_dir(run_dir)
            raise SystemExit(exc.exit_code) from None
        from llem.result import skeleton

        log.error("%s", exc.message)
        status = "skipped" if isinstance(exc, ConfigError) else "failed"
        record = skeleton(
            status=status, config_hash=_hash_or_none(cfg), overrides=overrides, started_at=utc_now()
        )
        record["error"] = exc.to_dict()
        if not (run_dir / "result.json").exists():  # keep a result the run already wrote
            write_result(run_dir, record)
        outcome.update(status=status, error=exc.message)
    except LlemError as exc:
        log.error("%s", exc.message)
        _print_error(exc)
        if not multirun:
            raise SystemExit(exc.exit_code) from None
        outcome.update(status="failed", error=exc.message)
    except Exception as exc:
        log.exception("unexpected error")
        if not multirun:
            traceback.print_exc()
            raise SystemExit(EXIT_UNEXPECTED) from None
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        outcome.update(status="failed", error=f"{type(exc).__name__}: {exc}")
    else:
        if result.get("status") == "dry_run":
            print(
                f"dry run: configuration valid, pre-flight passed (device {result['device']}); "
                "nothing loaded"
            )
            if not multirun:
                _discard_run_dir(run_dir)
        else:
            print(summary_line(result, run_dir))
        outcome.update(status=result.get("status", "ok"))
    STATE["outcomes"].append(outcome)
    return outcome


HELP = """\
llem: how fast and how energy-efficiently a causal LM generates text.

usage:
  python -m llem [KEY=VALUE ...]                  one run (default: the embedded SmolLM2-135M)
  python -m llem --multirun KEY=A,B [KEY=C,D ...]  a sweep over the grid
  python -m llem dry_run=true --multirun ...       validate and pre-flight every point, load nothing
  python -m llem.report DIR [DIR ...]              table, statistics and plots for finished runs

config groups (choose with GROUP=OPTION; +backend=pytorch adds the optional backend group):
{groups}
examples:
  python -m llem decoder=creative decoder.temperature=0.7 pytorch.batch_size=8
  python -m llem model=hf model.name_or_path=HuggingFaceTB/SmolLM2-360M-Instruct
  python -m llem --multirun pytorch.batch_size=1,4,16 quantization=none,bnb-4bit repeat='range(3)'

python -m llem --cfg job       shows every key of the composed configuration
python -m llem --hydra-help    lists Hydra's own flags (launchers, sweepers, logging)
exit codes: 0 ok, 1 unexpected, 2 configuration error, 3 pre-flight failure, 4 a sweep point failed
"""


def help_text() -> str:
    """llem's --help: the groups and their options, read from the shipped conf/ folder."""
    from importlib import resources

    conf = resources.files("llem").joinpath("conf")
    lines = []
    for group in sorted(p.name for p in conf.iterdir() if p.is_dir() and p.name != "hydra"):
        options = sorted(
            p.name[:-5] for p in conf.joinpath(group).iterdir() if p.name.endswith(".yaml")
        )
        if options:
            lines.append(f"  {group:<13} {', '.join(options)}")
    return HELP.format(groups="\n".join(lines))


def main(argv: Optional[List[str]] = None) -> int:
    """Run the command line (``argv`` without the program name); return the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("--help", "-h"):
        print(help_text(), end="")
        return EXIT_OK
    register_configs()
    if argv is not None:
        sys.argv = [sys.argv[0]] + list(argv)
    for key in ("sweep_outcomes", "sweep_dir", "dry_run_preflight_failed"):
        STATE.pop(key, None)
    STATE.update(task_started=False, multirun=False, outcomes=[])
    real_stderr = sys.stderr
    gate = _StderrGate(real_stderr)
    sys.stderr = gate
    code: Any = EXIT_OK
    try:
        hydra.main(version_base="1.3", config_path="conf", config_name="config")(task)()
    except SystemExit as exc:
        code = exc.code if exc.code is not None else EXIT_OK
    except KeyboardInterrupt:
        sys.stderr = real_stderr
        where = STATE.get("sweep_dir")
        print(
            "interrupted: finished runs are kept; nothing unfinished is marked ok"
            + (f"; resume with hydra.sweep.dir={where}" if where else ""),
            file=real_stderr,
        )
        return 130
    finally:
        sys.stderr = real_stderr
    if not STATE["task_started"] and code == EXIT_UNEXPECTED and gate.held().strip():
        # Hydra refused the command line while composing: a configuration error.
        print(f"error: {condense_hydra_error(gate.held())}", file=real_stderr)
        return EXIT_CONFIG
    if not gate.open:
        real_stderr.write(gate.held())
    if isinstance(code, str):
        print(code, file=real_stderr)
        return EXIT_UNEXPECTED
    if code == EXIT_OK and STATE.get("dry_run_preflight_failed"):
        return EXIT_PREFLIGHT
    if code == EXIT_OK and STATE["multirun"]:
        outcomes = STATE.get("sweep_outcomes", STATE["outcomes"])
        if any(o.get("status") == "failed" for o in outcomes):
            return EXIT_SWEEP_FAILED
    return int(code)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
