"""The tracker ``tracking.kind`` names, its package imported only when it is the one chosen."""

from __future__ import annotations

from typing import Any

from llem.tracking.tracker import Tracker


def tracker_for(t: Any) -> Tracker:
    """The tracker the config's ``tracking`` section names (MLflow or W&B)."""
    kind = str(getattr(t.kind, "value", t.kind)).removeprefix("TrackerKind.")
    if kind == "wandb":
        from llem.tracking.wandb_runs import WandbTracker

        mode = getattr(t.mode, "value", t.mode)  # an enum member, a string or null
        return WandbTracker(str(t.project), t.entity, mode, t.dir, float(t.timeout_s))
    from llem.tracking.upload import MlflowTracker

    return MlflowTracker(t.uri, str(t.experiment), float(t.timeout_s))
