"""The ``tracking:`` group: where a run or a sweep is logged besides its directory.

``+tracking=mlflow`` logs a parent run per sweep and a child run per point (a single run: one
run) to an MLflow tracking server, after each point's measured window (``llem.tracking``).
Credentials never come from here: MLflow reads them from its own environment variables
(``MLFLOW_TRACKING_TOKEN``, ``MLFLOW_TRACKING_USERNAME`` and ``MLFLOW_TRACKING_PASSWORD``), so
none is written into a config dump or a result. The section is not part of the config hash.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from enum import Enum
from urllib.parse import urlsplit

from llem.config.knobs import Destination, knob

TRACKER = Destination("tracker", "given to the tracker's client (MLflow's `MlflowClient`)")

# the tracker's Python package, by kind, with its install hint
PACKAGES = {"mlflow": ("mlflow", "pip install 'llem[tracking]'")}


class TrackerKind(Enum):
    none = "none"
    mlflow = "mlflow"


@dataclass
class TrackingConfig:
    kind: TrackerKind = knob(
        TrackerKind.none,
        doc="none: the run directory only; mlflow: also an MLflow tracking server. Set by "
        "`+tracking=mlflow`.",
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
    timeout_s: float = knob(
        5.0,
        doc="Seconds one request to the tracker may take, with no retries; a tracker that does "
        "not answer is given up for the rest of the sweep, which goes on.",
        goes_to=TRACKER,
        gt=0,
        le=120,
    )


def tracking_problems(t: TrackingConfig) -> list[str]:
    """A tracker whose package is not installed; credentials written into the URI."""
    problems: list[str] = []
    if t.kind != TrackerKind.none:
        package, hint = PACKAGES[t.kind.value]
        if importlib.util.find_spec(package) is None:
            problems.append(
                f"tracking.kind={t.kind.value} needs the Python package '{package}' "
                f"(not installed; {hint})"
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
