"""Write the Helm chart's `crds/` from the models, as `make crds` writes the top-level `crds/`.

Helm installs the files of a chart's `crds/` folder verbatim, so they are generated, never
edited: `tests/unit/deploy/test_chart.py` fails when they differ from the top-level `crds/` (which a
test in turn keeps equal to what the models produce). Only the bundled plugins' kinds go into
the chart: a third-party plugin installed in the same environment is blocked. Run after
`make crds`:

    .venv/bin/python hack/sync_chart_crds.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from t9kjobs.cli.main import main
from t9kjobs.manager import load_plugins

__all__ = ["BUNDLED_DISTRIBUTION", "CHART_CRDS", "sync"]

CHART_CRDS = Path(__file__).resolve().parents[1] / "deploy" / "helm" / "t9k-jobs" / "crds"
BUNDLED_DISTRIBUTION = "t9k-jobs"


def sync() -> int:
    foreign = [p.name for p in load_plugins().plugins() if p.distribution != BUNDLED_DISTRIBUTION]
    blocks = [f"--block-plugin={name}" for name in foreign]
    return main([*blocks, "crds", "--output-dir", str(CHART_CRDS)])


if __name__ == "__main__":
    sys.exit(sync())
