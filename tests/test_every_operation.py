"""Every operation over a tiny project of every registered task, as a user runs it (the command line; the map, which
only the dashboard starts, as its job runs it): each completes, or is refused before it starts with a message that
says what to do instead. Nothing crashes: an AttributeError, a KeyError or any other traceback fails the test."""
from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw
from test_objects import _random_case, _write

from hibug_core.cli import main
from hibug_core.operations import OPERATIONS
from hibug_core.store.project import Project
from hibug_core.tasks import TASKS

COLOURS = {"red": (220, 30, 30), "green": (30, 200, 40), "blue": (30, 40, 220)}
CAN = "hibug cannot"  # how a task's refusal begins (tasks.base.Capabilities.refusal)


def _classification(folder: Path) -> tuple[Path, str, str]:
    """48 drawn shapes in every split, both classes in each; two models' predictions."""
    data = folder / "data"
    data.mkdir(parents=True)
    rows = ["image,label,prediction,pred:other,split,attr:color"]
    for i in range(48):
        colour, shape = list(COLOURS)[i % 3], "circle" if (i // 6) % 2 else "square"
        image = Image.new("RGB", (48, 48), (255, 255, 255))
        draw = ImageDraw.Draw(image)
        (draw.ellipse if shape == "circle" else draw.rectangle)((10, 10, 38, 38), fill=COLOURS[colour])
        image.save(data / f"{i}.png")
        wrong = "square" if shape == "circle" else "circle"
        rows.append(f"{i}.png,{shape},{shape if i % 5 else wrong},{shape if i % 7 else wrong},"
                    f"{['train', 'val', 'train', 'val', 'pool', 'test'][i % 6]},{colour}")
    (data / "manifest.csv").write_text("\n".join(rows) + "\n")
    assert main(["new", str(folder / "p"), "--manifest", str(data / "manifest.csv")]) == 0
    return folder / "p", "model", "circle"


def _objects(folder: Path, keypoints: int, masks: bool = False) -> tuple[Path, str, str]:
    """30 seeded images of boxes (or of skeletons with `keypoints` keypoints, or of masks) with two models' results,
    and an unlabelled pool with the first model's detections."""
    truth, found = _random_case(4, n_images=30, keypoints=keypoints, masks=masks)
    rng = np.random.default_rng(2)
    other = [dict(d, score=float(rng.random())) for d in found if rng.random() < 0.8]
    truth_file, results = _write(folder / "data", truth, {"m": found, "other": other})
    sigmas = ["--keypoint-sigmas", ",".join(["0.05"] * keypoints)] if keypoints else []
    assert main(["new", str(folder / "p"), "--coco", str(truth_file), "--results", f"m={results['m']}",
                 f"other={results['other']}", *sigmas]) == 0
    pool_truth, pool_found = _random_case(5, n_images=6, keypoints=keypoints, masks=masks)
    pool_truth = dict(pool_truth, annotations=[],
                      images=[dict(i, file_name=f"pool/{i['id']}.png") for i in pool_truth["images"]])
    pool_file, pool_results = _write(folder / "pool", pool_truth, {"m": pool_found})
    assert main(["import", str(folder / "p"), "--coco", str(pool_file), "--results", f"m={pool_results['m']}",
                 "--split", "pool", "--unlabelled"]) == 0
    return folder / "p", "m", truth["categories"][0]["name"]


BUILD = {"classification": _classification, "detection": lambda f: _objects(f, 0), "pose": lambda f: _objects(f, 4),
         "segmentation": lambda f: _objects(f, 0, masks=True)}

# What each operation does on each task's tiny project: None, it completes; else the start of its refusal.
EXPECTED = {
    "classification": {},
    "detection": {
        "predict": f"{CAN} run the model itself for a project of objects: running a detector inside hibug is not "
                   "built yet: import its results as a COCO results file (hibug import PROJECT --models-only --coco",
        "generate": f"{CAN} repair with generated images for a project of objects: generated images come without "
                    "boxes",
        "failure search": f"{CAN} search for failures with generated images for a project of objects: failure search "
                          "scores generated images",
        "repair": "hibug cannot retrain 'm': only its results were imported",
        "repair linear head": f"{CAN} retrain the model of a project of objects with 'linear head': choose "
                              "'fine-tune'"},
    "pose": {
        "predict": f"{CAN} run the model itself for a project of people: import the keypoint model's results as a "
                   "COCO results file (hibug import PROJECT --models-only --coco",
        "generate": f"{CAN} repair with generated images for a project of people: generated images come without "
                    "keypoints",
        "failure search": f"{CAN} search for failures with generated images for a project of people: failure search "
                          "scores generated images",
        "repair": "hibug cannot retrain 'm': only its results were imported",
        "repair linear head": f"{CAN} retrain the model of a project of people with 'linear head': choose "
                              "'fine-tune'"},
    "segmentation": {
        "predict": f"{CAN} run the model itself for a project of objects: import the mask model's results as a COCO "
                   "results file with a 'segmentation' per detection",
        "generate": f"{CAN} repair with generated images for a project of objects: generated images come without "
                    "masks",
        "failure search": f"{CAN} search for failures with generated images for a project of objects: failure search "
                          "scores generated images",
        "repair": "hibug cannot retrain 'm': only its results were imported",
        "repair linear head": f"{CAN} retrain the model of a project of objects with 'linear head': choose "
                              "'fine-tune'"},
}


def _commands(project: Path, model: str, label: str, task: str) -> dict[str, list[str] | None]:
    """Each operation's command line on the project (None: the map, a dashboard job)."""
    p, out = str(project), project.parent
    own = "net" if task == "classification" else model  # the model hibug can run, where it can run one
    return {
        "propose": ["attributes", "propose", p],
        "suggest tags": ["attributes", "suggest-tags", p],
        "embed": ["embed", p],
        "tag": ["tag", p],
        "teach": ["teach", p, "TAUGHT", "--examples", str(out / "examples.csv")],
        "map": None,
        "predict": ["predict", p, "--model", "python:test_models:colour_model", "--name", "net"],
        "slices": ["slices", p, "--model", model],
        "unseen slices": ["slices", p, "--model", model, "--unseen", "substitution"],
        "compare": ["compare", p, "--models", f"{model},other"],
        "check": ["check", p, "--baseline", model, "--candidate", "other"],
        "select": ["select", p, "--model", model, "--budget", "3"],
        "repair": ["repair", p, "--model", own, "--budget", "3", "--seeds", "0", "--retrain",
                   "linear head" if task == "classification" else "fine-tune", "--features", "conse"],
        "repair linear head": ["repair", p, "--model", own, "--budget", "3", "--seeds", "0", "--retrain",
                               "linear head"],
        "generate": ["generate", p, "--model", model, "--images", "4", "--prompts", "class names"],
        "failure search": ["failure-search", p, "--label", label, "--model", own, "--images", "4", "--captions", "1",
                           "--generator", "shape-world renderer"],
        "report": ["report", p, "--output", str(out / "findings.html"), "--model", model],
    }


def _examples(project: Path) -> str:
    """A teaching CSV for the first attribute of two or more tags: four samples, two of each tag."""
    with Project.open(project) as opened:
        from hibug_core.store.attribute_versions import load_schema

        attribute = next(a for a in load_schema(opened).attributes if len(a.tags) >= 2 and a.enabled)
        keys = opened.samples()["sample_key"].iloc[:4]
    return attribute.name, "sample,tag\n" + "".join(f"{k},{attribute.tags[i % 2]}\n" for i, k in enumerate(keys))


def test_every_task_and_every_operation_has_a_case():
    assert set(EXPECTED) == set(TASKS.names()) == set(BUILD)
    built_in = {kind for kind, op in OPERATIONS.items() if op.__module__.startswith("hibug_core.operations.")}
    assert {k.replace(" linear head", "") for k in _commands(Path("p"), "m", "x", "pose")} == built_in


@pytest.mark.slow
@pytest.mark.parametrize("task", sorted(BUILD))
def test_every_operation_completes_or_is_refused_saying_what_to_do(task, tmp_path, monkeypatch):
    from hibug_core.jobs.kinds import run_operation
    from hibug_core.progress import no_progress

    monkeypatch.syspath_prepend(str(Path(__file__).parent))  # python:test_models:colour_model
    quiet = io.StringIO()
    with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
        project, model, label = BUILD[task](tmp_path)
    outcomes = {}
    for kind, argv in _commands(project, model, label, task).items():
        said = io.StringIO()
        with Project.open(project) as opened:
            before = opened.data_version()
        if kind == "teach":
            attribute, examples = _examples(project)
            (project.parent / "examples.csv").write_text(examples)
            argv = [attribute if word == "TAUGHT" else word for word in argv]
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(said):
            if argv is None:
                with Project.open(project) as opened:
                    run_operation(opened, OPERATIONS[kind].build({}), no_progress)
                code = 0
            else:
                code = main(argv)
        message = said.getvalue().strip().splitlines()[-1].removeprefix("error: ") if code else None
        outcomes[kind] = message
        if message and message.startswith(CAN):  # a task's refusal comes before anything is done
            with Project.open(project) as opened:
                assert opened.data_version() == before, kind
    wrong = {kind: said for kind, said in outcomes.items()
             if (EXPECTED[task].get(kind) is None) != (said is None)
             or (said is not None and not said.startswith(EXPECTED[task][kind]))}
    assert wrong == {}
