"""The suite's own layout: the browser and demo tests run on one worker (tests/conftest.py groups them), which CI's
time rests on; a pytest or xdist that silently drops the grouping fails here instead of slowing every run."""
from __future__ import annotations

import pytest


@pytest.mark.demos  # in the heavy group, as a demo's test is
def test_the_heavy_tests_are_scheduled_as_one_group(request):
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("run without xdist's --dist loadgroup (e.g. -n 0): nothing is scheduled")
    assert request.node.nodeid.endswith("@heavy"), (
        "xdist no longer sees the 'heavy' group (pytest-dev/pytest-xdist#1386): the browser and demo tests would "
        "run on both workers at once")
