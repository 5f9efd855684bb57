"""The ``tracking:`` group: where a run or a sweep is logged besides its directory.

``+tracking=mlflow`` logs a parent run per sweep and a child run per point (a single run: one
run) to an MLflow tracking server; ``+tracking=wandb`` logs a sweep as a W&B group with a run per
point; both after each point's measured window (``llem.tracking``). Credentials never come from
here: MLflow reads them from its own environment variables (``MLFLOW_TRACKING_TOKEN``,
``MLFLOW_TRACKING_USERNAME`` and ``MLFLOW_TRACKING_PASSWORD``), W&B from ``WANDB_API_KEY``, so
none is written into a config dump or a result. The section is not part of the config hash.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from enum import Enum
from urllib.parse import urlsplit

from llem.config.knobs import Destination, knob

TRACKER = Destination(
    "tracker", "given to the tracker's client (MLflow's `MlflowClient`, W&B's `wandb.init`)"
)

# the tracker's Python package, by kind, with its install hint
TRACKER_PACKAGES = {
    "mlflow": ("mlflow", "pip install 'llem[tracking]'"),
    "wandb": ("wandb", "pip install 'llem[tracking]'"),
}


class TrackerKind(Enum):
    none = "none"
    mlflow = "mlflow"
    wandb = "wandb"


class WandbMode(Enum):
    offline = "offline"
    online = "online"


@dataclass
class TrackingConfig:
    kind: TrackerKind = knob(
        TrackerKind.none,
        doc="none: the run directory only; mlflow: also an MLflow tracking server; wandb: also "
        "Weights & Biases. Set by `+tracking=mlflow` or `+tracking=wandb`.",
        goes_to=TRACKER,
    )
    uri: str | None = knob(
        None,
        doc="The tracking server, e.g. http://127.0.0.1:5000 (null: MLflow's own default, "
        "MLFLOW_TRACKING_URI). No credentials here: MLflow reads MLFLOW_TRACKING_TOKEN or "
        "MLFLOW_TRACKING_USERNAME/PASSWORD from the environment.",
        goes_to=TRACKER,
    )
    experiment: str = knob(
        "llem", doc="The MLflow experiment the runs go into (created if absent).", goes_to=TRACKER
    )
    project: str | None = knob(
        None,
        doc="wandb: the W&B project the runs go into (required with `+tracking=wandb`).",
        goes_to=TRACKER,
    )
    entity: str | None = knob(
        None,
        doc="wandb: the W&B entity (team or user; null: the API key's default entity).",
        goes_to=TRACKER,
    )
    mode: WandbMode | None = knob(
        None,
        doc="wandb: offline writes the runs under tracking.dir for a later `wandb sync` and "
        "touches no network; online sends them (null: WANDB_MODE, else W&B's default, online). "
        "The API key comes from WANDB_API_KEY only.",
        goes_to=TRACKER,
    )
    dir: str | None = knob(
        None,
        doc="wandb: the folder W&B writes its run files under (a `wandb/` folder in it; null: "
        "the sweep's or the run's own directory).",
        goes_to=TRACKER,
    )
    timeout_s: float = knob(
        5.0,
        doc="Seconds one request to the tracker may take, with no retries; a tracker that does "
        "not answer before the run or sweep starts stops it (exit 3), one that stops answering "
        "later is given up for the rest of the sweep, which goes on.",
        goes_to=TRACKER,
        gt=0,
        le=120,
    )


def tracking_problems(t: TrackingConfig) -> list[str]:
    """A tracker whose package is not installed; W&B without a project; credentials written
    into the URI."""
    problems: list[str] = []
    if t.kind != TrackerKind.none:
        package, hint = TRACKER_PACKAGES[t.kind.value]
        if importlib.util.find_spec(package) is None:
            problems.append(
                f"tracking.kind={t.kind.value} needs the Python package '{package}' "
                f"(not installed; {hint})"
            )
    if t.kind == TrackerKind.wandb and not (t.project or "").strip():
        problems.append(
            f"tracking.project={t.project}: +tracking=wandb needs the W&B project the runs go "
            "into, e.g. tracking.project=llem-sweeps"
        )
    if t.uri is not None:
        parts = urlsplit(t.uri)
        if parts.password is not None:
            shown = t.uri.replace(f":{parts.password}@", ":***@", 1)
            problems.append(
                f"tracking.uri={shown}: a password in the URI would be written into every "
                "point's config; set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD "
                "(or MLFLOW_TRACKING_TOKEN) in the environment instead"
            )
        elif parts.scheme not in ("http", "https", "file", "sqlite", "databricks", ""):
            problems.append(
                f"tracking.uri={t.uri}: allowed schemes are http, https, file, sqlite and "
                "databricks"
            )
    return problems
