"""The Repair page under AppTest: selection with its downloads and images, prompts and a generation job, a repair job
with its before/after comparison, and a failure-search job, all on a copy of the demo."""
from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from hibug_core.jobs.store import jobs
from hibug_core.store.project import Project

from page_support import labelled
from page_support import open_page as open_any
from waiting import wait_until


def open_page(monkeypatch, folder, **query) -> AppTest:
    return open_any(monkeypatch, "pages/5_Repair.py", folder, user="ana", **query)


def wait_for(folder, kind: str, timeout: float = 240) -> dict:
    with Project.open(folder) as project:
        wait_until(lambda: not jobs(project, kind)[0].live, timeout, what=f"the {kind} job", every=0.5)
        job = jobs(project, kind)[0]
    assert job.status == "done", (job.status, job.error)
    return job.result


def button(at: AppTest, label: str):
    return labelled(at.button, label)


def test_selection_lists_pool_images_for_the_worst_slices(monkeypatch, demo_project):
    at = open_page(monkeypatch, demo_project)
    assert not at.exception
    assert at.title[0].value == "Repair"
    labelled(at.selectbox, "Method").set_value("hibug")
    at.text_input(key="repair_select_budget").set_value("40")
    button(at, "Select pool images").click().run()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Selected"] == "40" and metrics["Budget"] == "40"
    budgets = [c.value for c in at.caption if c.value.startswith("= ")]  # each budget read both ways
    assert budgets == ["= 40 images, 2.9% of the 1,378 training images",
                       "= 138 images, 10.0% of the 1,378 training images"]
    table = at.dataframe[0].value
    assert len(table) == 40 and table["slice"].str.contains("blue").mean() > 0.5
    assert {b.label for b in at.get("download_button")} == {"Download CSV", "Download Parquet"}
    assert len(at.get("image")) == 24  # the first page of the selected images
    # The uncertainty baseline uses no slice.
    labelled(at.selectbox, "Method").set_value("uncertainty")
    button(at, "Select pool images").click().run()
    assert at.dataframe[0].value["slice"].isna().all()


@pytest.mark.slow
def test_prompts_are_written_and_a_generation_job_stores_images(monkeypatch, demo_copy):
    at = open_page(monkeypatch, demo_copy)
    button(at, "Write prompts").click().run()
    assert not at.exception
    prompts = at.dataframe[0].value  # the prompts editor
    assert prompts["prompt"].tolist()[:2] == ["A photo of a blue triangle", "A photo of a blue rectangle"]
    labelled(at.number_input, "Images").set_value(12)
    button(at, "Generate").click().run()
    assert not at.exception
    result = wait_for(demo_copy, "generate")
    assert result["images"] == 12 and result["generator"] == "shape-world renderer"
    at = open_page(monkeypatch, demo_copy)
    assert not at.exception
    assert any("12 images from shape-world renderer" in c.value for c in at.caption)


@pytest.mark.slow
def test_a_repair_job_shows_before_and_after_slice_by_slice(monkeypatch, demo_copy):
    at = open_page(monkeypatch, demo_copy)
    assert any("No repair has been compared yet" in i.value for i in at.info)
    at.text_input(key="repair_retrain_budget").set_value("30")
    button(at, "Retrain and compare").click().run()
    assert not at.exception
    with Project.open(demo_copy) as project:
        job = jobs(project, "repair")[0]
    assert job.params["budget"] == 30 and isinstance(job.params["budget"], int)
    assert job.params["seeds"] == [0, 1, 2] and job.author == "ana"
    result = wait_for(demo_copy, "repair")
    assert result["models"] == 9  # expected failures, random, no new data, over 3 seeds by default
    assert result["summary"] == (f"Repair run {result['run']}: 9 models retrained and compared (3 methods x 3 seeds); "
                                 "the verdict and the slice-by-slice comparison are below.")
    at = open_page(monkeypatch, demo_copy)
    assert not at.exception
    assert {m.label for m in at.metric} >= {"expected failures", "random", "no new data"}
    shown = [e.value.replace("\\", "") for e in (*at.info, *at.success)]  # the verdict, shown as escaped text
    verdicts = [v for v in shown if "Held-out accuracy 89.0% before" in v]
    assert len(verdicts) == 1  # once: in its own box, not again in the job's message
    verdict = verdicts[0]
    assert "On the overall held-out: " in verdict and "of 3 seeds)." in verdict
    summary = at.dataframe[-1].value
    assert {"color = blue", "size = small & shape = triangle"} <= set(summary["slice"])
    assert set(summary["method"]) == {"expected failures", "random", "no new data"}
    figure = json.loads(at.get("plotly_chart")[0].proto.spec)  # every drawn series named in the legend
    named = [t["name"] for t in figure["data"] if t.get("showlegend", True) and t.get("x") is not None]
    assert sorted(named) == sorted(["expected failures", "random", "no new data", "before"])
    assert figure["layout"].get("showlegend", True)
    axes = figure["layout"]
    assert (axes["xaxis"]["title"]["text"], axes["yaxis"]["title"]["text"]) == ("accuracy after repair", "slice")


@pytest.mark.slow
def test_failure_search_job_lists_captions_that_fail_more(monkeypatch, demo_copy):
    at = open_page(monkeypatch, demo_copy)
    labelled(at.selectbox, "Class").set_value("triangle")
    labelled(at.number_input, "Failures captioned").set_value(3)
    button(at, "Search for failures").click().run()
    assert not at.exception
    result = wait_for(demo_copy, "failure search")
    assert result["significant"] >= 1
    at = open_page(monkeypatch, demo_copy)
    table = at.dataframe[-1].value
    assert table["caption"].iat[0] == "A photo of a triangle"
    significant = table.loc[table["significant"], "caption"]
    assert "blue" in significant.iat[0]  # the planted spurious colour fails most; small triangles may follow


@pytest.mark.slow
def test_a_typed_caption_is_tested_from_the_page_and_the_command(monkeypatch, demo_copy, capsys):
    from hibug_core.cli import main

    at = open_page(monkeypatch, demo_copy)
    labelled(at.selectbox, "Class").set_value("triangle")
    labelled(at.text_area, "Captions to test").set_value("A blue triangle.\nA red triangle.")
    labelled(at.checkbox, "Also caption the baseline's failures").uncheck()
    button(at, "Search for failures").click().run()
    assert not at.exception
    result = wait_for(demo_copy, "failure search")
    assert result["summary"].startswith("3 captions of triangle tested; 1 make the model fail significantly more often")
    assert "Your caption 'A blue triangle.': 29 of 32 images fail (91%), significantly more often than the " \
           "baseline's" in result["summary"]
    at = open_page(monkeypatch, demo_copy)
    verdicts = {v.value.split(":")[0]: v.value for v in (*at.warning, *at.info) if v.value.startswith("Your caption")}
    assert "significantly more often than the baseline's" in verdicts["Your caption 'A blue triangle.'"]
    assert "Most of its failures are called 'circle'" in verdicts["Your caption 'A blue triangle.'"]  # the shortcut
    assert "not significantly more often" in verdicts["Your caption 'A red triangle.'"]
    origins = at.dataframe[-1].value["origin"].tolist()
    assert origins[:3] == ["baseline", "typed by a person", "typed by a person"]
    assert "caption of a failure" not in origins  # the search's own captions were off

    capsys.readouterr()
    assert main(["failure-search", str(demo_copy), "--label", "triangle", "--caption", "A blue triangle.",
                 "--no-caption-failures", "--images", "16"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("*") and "A blue triangle.  (typed)  -> 'circle'" in lines[1]
    assert main(["failure-search", str(demo_copy), "--label", "triangle", "--caption", "A blue circle."]) == 2
    assert "'A blue circle.' does not name the class 'triangle'" in capsys.readouterr().err


def test_generating_with_missing_diffusion_weights_says_how_to_provide_them(monkeypatch, demo_project, tmp_path):
    at = open_page(monkeypatch, demo_project)
    button(at, "Write prompts").click().run()
    labelled(at.selectbox, "Generator").set_value("diffusers")
    labelled(at.text_input, "Model (hub id, folder or API model)").set_value(str(tmp_path / "no-weights"))
    button(at, "Generate").click().run()
    assert not at.exception
    assert "Cannot generate offline" in at.error[0].value and "huggingface-cli download" in at.error[0].value
    with Project.open(demo_project) as project:
        assert not jobs(project, "generate")  # nothing was started


@pytest.mark.slow
def test_a_detector_gets_pool_images_chosen_by_their_objects_and_prompts_without_generation(monkeypatch,
                                                                                            detection_demo):
    at = open_page(monkeypatch, detection_demo)
    assert not at.exception
    assert any("fine-tuned on labelled pool images, judged by the objects found" in c.value for c in at.caption)
    labelled(at.selectbox, "Method").set_value("expected failures")
    at.text_input(key="repair_select_budget").set_value("30")
    button(at, "Select pool images").click().run()
    assert not at.exception
    table = at.dataframe[0].value
    assert len(table) == 30 and table["image_key"].is_unique and table["image_key"].str.startswith("images/pool/").all()
    assert (table["detections"] >= 1).all()
    assert len(at.get("image")) == 24  # each image's likeliest failure, as its crop
    button(at, "Write prompts").click().run()
    assert not at.exception
    prompts = at.dataframe[1].value
    assert len(prompts) and not prompts["label"].isin(["(background)", "(missed)"]).any()
    assert any("cannot teach a detector" in i.value for i in at.info)
    assert not [b for b in at.button if b.label == "Generate"]
