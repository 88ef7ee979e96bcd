"""The suite's own layout: the demos' tests run on one worker, the other browser tests on one (tests/conftest.py
groups them), which CI's time rests on; a pytest or xdist that silently drops the grouping fails here instead of
slowing every run."""
from __future__ import annotations

import pytest


@pytest.mark.demos  # in the demos' group, as a demo's test is
def test_the_demos_tests_are_scheduled_as_one_group(request):
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("run without xdist's --dist loadgroup (e.g. -n 0): nothing is scheduled")
    assert request.node.nodeid.endswith("@demos"), (
        "xdist no longer sees the 'demos' group (pytest-dev/pytest-xdist#1386): each worker would build every demo")


@pytest.mark.browser
def test_the_browser_tests_are_scheduled_as_one_group(request):
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("run without xdist's --dist loadgroup (e.g. -n 0): nothing is scheduled")
    assert request.node.nodeid.endswith("@browser"), (
        "xdist no longer sees the 'browser' group: two browser tests would run at once and thrash")
