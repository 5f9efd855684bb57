"""The tracker checked once before a run or a sweep starts, before any model loads.

A tracker that cannot be used at the start is bad input, not a failure mid-sweep: MLflow's server
must answer and hold (or create) the experiment; W&B online must be reached and accept the key.
Each request has ``tracking.timeout_s`` and no retries. A refusal is one ``PreflightError`` line
(exit 3) that names the key, MLflow's or W&B's reason and what to do; nothing has been measured.
W&B offline is not checked: it must not touch the network. A dry run checks nothing (the caller
does not call). The check leaves nothing running: MLflow's client is synchronous, and W&B's
service, which its API goes through, is torn down before the check returns.
"""

from __future__ import annotations

import math
import os
import re

from omegaconf import DictConfig, OmegaConf

from llem.config.tracking import TrackerKind, TrackingConfig, tracking_problems
from llem.errors import PreflightError

_LATER = "or drop +tracking and log the results later with `llem-report --to-{tracker} DIR`"


def check_tracker(section: TrackingConfig | DictConfig | None) -> None:
    """Raise ``PreflightError`` when the tracker ``section`` selects cannot be used now.

    Nothing is checked when no tracker is selected, or when the section has a problem of its own
    (validation says that one, exit 2)."""
    if section is None:
        return
    t = OmegaConf.to_object(section) if isinstance(section, DictConfig) else section
    if not isinstance(t, TrackingConfig) or t.kind == TrackerKind.none or tracking_problems(t):
        return
    if t.kind == TrackerKind.mlflow:
        _check_mlflow(t)
    elif _wandb_mode(t) == "online":
        _check_wandb(t)


def _check_mlflow(t: TrackingConfig) -> None:
    from llem.tracking.mlflow_runs import ExperimentRefused, MlflowRuns

    where = f"tracking.uri={t.uri}" if t.uri else "tracking.uri=null (MLFLOW_TRACKING_URI)"
    try:
        MlflowRuns(t.uri, t.experiment, t.timeout_s)
    except ExperimentRefused as exc:
        raise PreflightError(
            [
                f"{where}: MLflow refuses tracking.experiment={t.experiment}: {exc}; name "
                f"another experiment, {_LATER.format(tracker='mlflow')}"
            ]
        ) from None
    except Exception as exc:  # the client's own errors: connection refused, timeout, HTTP status
        raise PreflightError(
            [
                f"{where}: MLflow cannot be reached ({_reason(exc)}); start the server or fix "
                f"tracking.uri, {_LATER.format(tracker='mlflow')}"
            ]
        ) from None


def _wandb_mode(t: TrackingConfig) -> str:
    mode = getattr(t.mode, "value", t.mode)
    return str(mode or os.environ.get("WANDB_MODE") or "online")


def _check_wandb(t: TrackingConfig) -> None:
    """W&B reached and the key accepted: wandb's public API verifies the key when it is made."""
    from llem.tracking.wandb_runs import no_telemetry

    no_telemetry()
    import wandb

    project = f"{t.entity}/{t.project}" if t.entity else str(t.project)
    try:
        wandb.Api(timeout=max(1, math.ceil(t.timeout_s)))
    except Exception as exc:
        raise PreflightError(
            [
                f"tracking.project={project}: W&B online cannot be reached or refuses the key "
                f"({_reason(exc)}); check WANDB_API_KEY and the network, set "
                f"tracking.mode=offline, {_LATER.format(tracker='wandb')}"
            ]
        ) from None
    finally:
        wandb.teardown()  # the service its API went through: nothing left running


def _reason(exc: BaseException) -> str:
    """The exception's type and first line; for a request that got no answer, the socket's own
    words (``[Errno 111] Connection refused``, ``Read timed out``) rather than the whole
    connection pool's message, whose end (the words) a line of 300 characters would cut off."""
    text = str(exc).strip()
    errno = re.search(r"\[Errno -?\d+\][^'\")]*", text)
    if errno is not None:
        text = f"no answer: {errno.group(0).strip()}"
    elif "timed out" in text.lower():
        text = "no answer: timed out"
    lines = text.splitlines()
    return f"{type(exc).__name__}: {lines[0][:300] if lines else ''}".rstrip(": ")
