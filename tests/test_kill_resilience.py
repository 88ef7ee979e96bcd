"""SIGKILL in the middle of a tagging run: no committed tag is lost and the run resumes. The worker killed (the run
is seen as interrupted, resumed, and asks only what was not answered) and the dashboard killed (the run, in its own
process, finishes; the restarted dashboard shows it)."""
from __future__ import annotations

import os
import re
import signal

import pytest

from hibug_core.jobs import store as job_store
from hibug_core.jobs.store import get_job, jobs
from hibug_core.jobs.worker import resume, submit
from hibug_core.store import tag_store
from hibug_core.store.db import read_connection
from hibug_core.tagging.run import current_tags

from fake_openai import FakeOpenAIServer
from job_helpers import job_op
from waiting import wait_until

pytestmark = pytest.mark.slow


def answered(project) -> int:
    with read_connection(project.engine) as connection:
        return int(connection.exec_driver_sql("SELECT COUNT(*) FROM mllm_answers WHERE answer_json IS NOT NULL")
                   .scalar_one())


def test_a_killed_tagging_worker_keeps_its_answers_and_the_resumed_run_asks_only_the_rest(colour_project,
                                                                                         monkeypatch):
    tag_store.correct_tags(colour_project, "color", [3], "green", author="ana")  # committed before the run
    with FakeOpenAIServer(delay_s=0.4) as server:
        monkeypatch.setenv("HIBUG_LLM_CONCURRENCY", "1")  # the worker inherits it: one request at a time
        params = {"attributes": ["color"], "llm": True, "llm_base_url": server.url, "llm_model": "fake-vision"}
        job_id = submit(colour_project, job_op("tag", params), author="ana")
        wait_until(lambda: answered(colour_project) >= 3, what="three committed answers")
        with read_connection(colour_project.engine) as connection:
            pid = connection.exec_driver_sql(f"SELECT pid FROM jobs WHERE id = {job_id}").scalar_one()
        os.kill(pid, signal.SIGKILL)
        kept = answered(colour_project)
        asked_before = len(server.requests)
        monkeypatch.setattr(job_store, "STALE_AFTER_S", 1.0)
        wait_until(lambda: get_job(colour_project, job_id).status == "interrupted", what="the interrupted job")
        assert answered(colour_project) == kept >= 3  # nothing committed was lost
        resumed = resume(colour_project, job_id, author="ana")
        monkeypatch.setattr(job_store, "STALE_AFTER_S", 30.0)
        wait_until(lambda: not get_job(colour_project, resumed).live, timeout=120, what="the resumed job")
        assert get_job(colour_project, resumed).status == "done", get_job(colour_project, resumed).error
        asked_after = len(server.requests) - asked_before
    assert asked_after <= 12 - kept + 1  # only the unanswered images (one may have been in flight at the kill)
    assert answered(colour_project) == 12
    runs = tag_store.runs(colour_project)
    assert runs["status"].tolist() == ["finished"]  # the same run, resumed and finished
    tags = current_tags(colour_project).tags["color"].astype(str)
    assert tags.loc[3] == "green"  # ana's correction (the image is blue) outlives the run
    expected = dict(zip(tags.index, ["red", "green", "blue"] * 4))
    assert {s: t for s, t in tags.items() if s != 3} == {s: t for s, t in expected.items() if s != 3}


@pytest.mark.browser
def test_killing_the_dashboard_mid_run_loses_nothing_and_the_run_finishes(colour_project, browser):
    from browser_support import SERVED, serving

    with FakeOpenAIServer(delay_s=0.4) as server:
        with serving(colour_project.folder) as url:
            page = browser.new_page(viewport={"width": 1400, "height": 1200})
            page.goto(f"{url}/Tagging")
            page.get_by_text("Start tagging").wait_for(timeout=60_000)
            page.get_by_text("multimodal LLM", exact=True).click()
            page.get_by_role("textbox", name="LLM server URL").fill(server.url)
            page.get_by_role("textbox", name="LLM model").fill("fake-vision")
            page.get_by_role("button", name="Start tagging").click()
            wait_until(lambda: answered(colour_project) >= 3, what="three committed answers")
            SERVED[url].send_signal(signal.SIGKILL)  # the dashboard's process, at once
            SERVED[url].wait(timeout=10)
            kept = answered(colour_project)
            job = jobs(colour_project, "tag")[0]
            wait_until(lambda: not get_job(colour_project, job.id).live, timeout=120, what="the job")
            assert get_job(colour_project, job.id).status == "done"
            assert answered(colour_project) == 12 >= kept
            page.close()
    # A new dashboard shows the finished run.
    with serving(colour_project.folder) as url:
        page = browser.new_page()
        page.goto(f"{url}/Tagging")
        page.get_by_text(re.compile(r"Job \d+ \(tag\) finished")).first.wait_for(timeout=60_000)
        page.close()

