"""The detection and pose demos in real headless Chromium, as a user goes past the first error slice: the Overview's
score judges true objects and people only (as the Error slices page does), a second model's COCO results uploaded on
the Overview, the model a repair recorded, and Compare reached with all three; failure search refused in the task's
words on the Repair page; a planted slice opened with its annotation bug and an object's details, whose overlap is
the task's (OKS for people, IoU for boxes)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from browser_support import add_another_model, open_app, open_slice_row, serving, shot, shown

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.demos]  # the demos reached by getfixturevalue
DEMOS = {  # task: (its demo fixture, a planted slice, its annotation bug, the task's overlap, the other one)
    "detection": ("detection_demo", {("color", "green"), ("class", "triangle")}, "missing annotations", "IoU", "OKS"),
    "pose": ("pose_demo", {("facing", "back")}, "left and right swapped", "OKS", "IoU"),
}


@pytest.fixture(scope="module", params=sorted(DEMOS))
def repaired_demo(request, tmp_path_factory):
    """(task, a copy of the task's demo after `hibug repair --record` (a small one), a stricter model's results on val:
    the demo model's detections at confidence 0.9 or more)."""
    from hibug_core.store.project import Project

    task = request.param
    folder = tmp_path_factory.mktemp(task) / "demo"
    shutil.copytree(request.getfixturevalue(DEMOS[task][0]), folder)
    with Project.open(folder, read_only=True) as project:
        model = project.models()[0]
    run = subprocess.run([sys.executable, "-m", "hibug_core.cli", "repair", str(folder), "--budget", "16", "--epochs",
                          "1", "--seeds", "0", "--no-control", "--baseline", "none", "--record"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    found = json.loads((folder / "data" / f"{model}_val.json").read_text())
    stricter = folder.parent / "stricter.json"
    stricter.write_text(json.dumps([d for d in found if d["score"] >= 0.9]))
    return task, folder, stricter


def test_a_second_model_and_a_repaired_one_are_compared_and_failure_search_is_refused_in_words(browser, repaired_demo):
    from hibug_core.slices.report import error_slices
    from hibug_core.store.project import Project

    task, folder, stricter = repaired_demo
    _, planted, bug, overlap, other_overlap = DEMOS[task]
    with Project.open(folder, read_only=True) as project:
        first, repaired = project.models()
        ranked = error_slices(project, first)
        val = project.model_scores().set_index(["model", "split"]).at[(first, "val"), "mean_score"]
    row = next(rank for rank, definition in enumerate(ranked.slices["definition"].head(5))
               if set(definition) == planted)
    assert ranked.slices["bug_type"].iat[row] == bug
    assert val == pytest.approx(1 - ranked.evaluation["error"].mean())  # one baseline: true objects or people only

    with serving(folder) as url:
        page = browser.new_page(viewport={"width": 1500, "height": 1500})
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        open_app(page, url)
        # The Overview's val figure is the Error slices' overall one, false positives counted apart, named alike.
        from hibug_core.tasks import task_named

        label = f"val {task_named(task).nouns.figure}"
        shown(page, label)
        assert page.get_by_test_id("stMetric").filter(has_text=label).first.inner_text().endswith(f"{val:.1%}")

        said = add_another_model(page, "stricter", stricter)
        with Project.open(folder, read_only=True) as project:
            assert project.models() == [first, repaired, "stricter"]
            expected = project.object_evaluation("stricter", "val")["summary"]["AP"]
        assert f"AP {expected:.3f} on val" in said
        shot(page, f"{task}-demo-1-second-model")

        open_app(page, f"{url}/Compare?models={first},{repaired},stricter".replace(" ", "%20").replace("·", "%C2%B7"))
        shown(page, "(baseline)", timeout=180_000)
        assert page.get_by_text("This project holds one model").count() == 0
        cards = page.get_by_test_id("stMetric")
        assert cards.filter(has_text="stricter").count() >= 1 and cards.filter(has_text="repair 1").count() >= 1
        shot(page, f"{task}-demo-2-compare")

        open_app(page, f"{url}/Repair")
        page.get_by_role("tab", name="Failure search").click()
        refusal = shown(page, "Hibug cannot search for failures with generated images").inner_text()
        assert "error slices" in refusal  # what to do instead
        assert page.get_by_role("button", name="Search for failures").count() == 0
        shot(page, f"{task}-demo-3-repair-refusal")

        description = ranked.slices["description"].iat[row]
        open_slice_row(page, url, row, description)
        page.locator("strong", has_text=bug).first.wait_for(timeout=60_000)  # its annotation bug, on its heading
        page.get_by_role("button", name="Details").first.click()
        dialog = page.get_by_role("dialog")
        dialog.get_by_text(f" · {overlap} ").first.wait_for(timeout=60_000)
        assert dialog.get_by_text(f" · {other_overlap} ").count() == 0
        shot(page, f"{task}-demo-4-details")
        assert errors == [], errors
        page.close()
