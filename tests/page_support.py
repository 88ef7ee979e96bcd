"""Opening a dashboard page under AppTest on a project, as a named user, with a URL query."""
from __future__ import annotations

import json
from pathlib import Path

from streamlit.testing.v1 import AppTest

REPO = Path(__file__).resolve().parents[1]


def open_page(monkeypatch, page: str, folder, *, user: str | None = None, timeout: float = 120,
              **query) -> AppTest:
    """Run `page` (a path in the repository, e.g. "pages/2_Tagging.py") on the project in `folder`."""
    monkeypatch.setenv("HIBUG_PROJECT", str(folder))
    if user is not None:
        monkeypatch.setenv("HIBUG_USER", user)
    at = AppTest.from_file(str(REPO / page), default_timeout=timeout)
    for key, value in query.items():
        at.query_params[key] = value
    return at.run()


def serve(monkeypatch, **policy) -> None:
    """Page tests from now on run under a server policy (hibug_core.serving.policy.ServerPolicy's fields), as
    `hibug serve` hands it to the dashboard."""
    from hibug_core.serving.policy import POLICY_ENV, ServerPolicy

    monkeypatch.delenv("HIBUG_PROJECT", raising=False)
    monkeypatch.setenv(POLICY_ENV, ServerPolicy.build(**policy).model_dump_json())


def labelled(widgets, label: str):
    """The widget among `widgets` (e.g. at.selectbox) whose label is `label`."""
    return next(w for w in widgets if w.label == label)


def charts(at) -> list[dict]:
    """The page's Plotly figures, in order, as their JSON specs."""
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def bars(figure: dict) -> dict:
    """A one-trace bar chart's {x: y}, its values decoded (Plotly writes numeric arrays as base64 "bdata")."""
    trace = figure["data"][0]
    return dict(zip(_decoded(trace["x"]), _decoded(trace["y"])))


def _decoded(values) -> list:
    import base64

    import numpy as np

    if isinstance(values, dict):
        values = np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"]).tolist()
    return list(values)
