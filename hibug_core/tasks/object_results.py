"""Another model's COCO results into an object project: matched against the ground truth the project was made from,
with the project's own match settings and tag bins, its outputs stored beside the first model's."""
from __future__ import annotations

from pathlib import Path

from hibug_core.models.object_models import DetectorError


def ground_truth_file(project, model: str, split: str) -> Path:
    """The COCO ground-truth file `model`'s objects of `split` were imported from (found where the project was
    moved, if it lay inside it); DetectorError when there is none or it is gone."""
    from sqlalchemy import text

    from hibug_core.store.db import read_connection

    evaluation = project.object_evaluation(model, split)
    if evaluation is None:
        raise DetectorError(f"'{model}' has no evaluated objects in '{split}'; import that split's ground truth with "
                            "its results, or use another split")
    with read_connection(project.engine) as connection:
        source = connection.execute(text("SELECT source FROM imports WHERE id = :i"),
                                    {"i": evaluation["import_id"]}).scalar_one()
    path = _moved_with_project(Path(source), project.folder)
    if not path.exists():
        raise DetectorError(f"the ground truth of '{split}' was imported from {path}, which is gone; put it back to "
                            "use it")
    return path


def _moved_with_project(path: Path, folder: Path) -> Path:
    """`path`, or where it is now if it lay inside a project folder that was moved (or built in a staging folder and
    renamed): the longest tail of it that exists under `folder`."""
    if path.exists():
        return path
    for start in range(1, len(path.parts)):
        candidate = folder.joinpath(*path.parts[start:])
        if candidate.exists():
            return candidate
    return path


def add_results(project, name: str, results: str | Path, split: str, *, truth=None, author: str | None = None,
                note: dict | None = None):
    """Add model `name`'s COCO results on `split` to the project, matched against that split's ground truth (`truth`:
    a file or one read already; default: the file the project's first model of that split was imported from) exactly
    as the project's own models were; its false positives become samples of their own. Returns the ImportSummary."""
    from hibug_core.objects.geometry import GeometryConfig
    from hibug_core.objects.matching import stored_match_config
    from hibug_core.store.project import MEASURES_META
    from hibug_core.tasks.importing import load_coco

    if truth is None:
        evaluated = [m for m in project.models() if project.object_evaluation(m, split) is not None]
        if not evaluated:
            raise DetectorError(f"no model of this project was evaluated on '{split}'; import that split's ground "
                                "truth first (hibug import PROJECT --coco TRUTH.json --results ...)")
        truth = ground_truth_file(project, evaluated[0], split)
    manifest = load_coco(truth, {name: Path(results)}, split=split, task=project.task,
                         match_config=stored_match_config(project.match_settings()),
                         geometry=GeometryConfig.from_json(project.meta().get(MEASURES_META)))
    return project.add_model_outputs(manifest, author=author, note=note)
