"""``-o patch``: what ``find-flags --fix`` would send, as JSON patches (one per object), for a
GitOps repository or ``kubectl patch``."""

from __future__ import annotations

import json

from kubectl_kvdtype._kits.report import Report
from kubectl_kvdtype._output.format import Rendering


def write_patch(report: Report, _how: Rendering) -> str:
    return json.dumps(report.patches or [], indent=2) + "\n"
