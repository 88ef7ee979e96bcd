"""Recording a model whose outputs were imported, so hibug can run and retrain it: its checkpoint (a model registry
spec) and, for a model of objects, the annotations it was trained on (what a repair fine-tunes from and what the
annotation audit reads)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hibug_core.errors import HibugError
from hibug_core.models.object_models import ObjectModelAdapter
from hibug_core.models.registry import ModelLoadError, absolute_spec, load_model
from hibug_core.objects.coco import read_ground_truth
from hibug_core.safe_files import inside
from hibug_core.store.recorded_models import RecordedModel, record_model
from hibug_core.tasks.registry import task_named


class RecordError(HibugError):
    """A model cannot be recorded as given: the message says what to fix."""


@dataclass(frozen=True)
class Recorded:
    model: RecordedModel
    training_images: int  # images in the training annotations
    in_project: int  # of them, images of the project's training split (what the annotation audit reads)


def record_model_files(project, name: str, spec: str, training: str | Path | None = None, *,
                       author: str | None = None) -> Recorded:
    """Record `spec` as the network behind the model `name` (its outputs already in the project), with the COCO file of
    what it was trained on (required for a model of objects; its images are read beside it). Files are recorded by
    their absolute paths, as a project's images are. Checked before anything is stored: RecordError (or the COCO
    reader's ManifestError) saying what to fix."""
    # 1. The model is one of the project's, the spec loads, and a model of objects comes with its annotations.
    models = project.models()
    if name not in models:
        raise RecordError(f"no model '{name}' in this project ({', '.join(models) or 'none yet'}): import its outputs "
                          "first (hibug import --models-only)")
    spec = absolute_spec(spec.strip())  # as the project's images are: by where they are
    try:
        adapter = load_model(spec)
    except ModelLoadError as error:
        raise RecordError(f"'{spec}' does not load: {error}") from None
    objects = isinstance(adapter, ObjectModelAdapter)
    task = task_named(project.task) if project.task else None
    if task is not None and adapter.draws[:1] != task.shapes[:1]:  # it must give what the project's samples are
        says = f"draws {' and '.join(adapter.draws)}" if adapter.draws else "judges whole images"
        wanted = (f"draws {' and '.join(task.shapes)}" if task.shapes else "judges whole images")
        raise RecordError(f"'{spec}' {says}, but this project's {task.nouns.samples} need a model that {wanted} "
                          f"({task.name}): record the network that gave '{name}'s outputs")
    if objects and training is None:
        raise RecordError(f"'{name}' is a model of objects: give the COCO file of the annotations it was trained on "
                          "(--training TRAIN.json); a repair fine-tunes from them")
    # 2. The training annotations read as COCO, name the model's classes, and their images are there.
    count = in_project = 0
    if training is not None:
        path = Path(training).expanduser().resolve()
        truth = read_ground_truth(path)  # ManifestError naming every bad record
        missing = sorted(set(getattr(adapter, "classes", ())) - set(truth.categories.values()))
        if missing:
            raise RecordError(f"{path} has no category for the model's classes {', '.join(missing)}: give the "
                              "annotations the model was trained on")
        outside = [n for n in truth.images["file_name"] if not inside(path.parent / n, path.parent)]
        if outside:  # read beside it, never elsewhere through '..', an absolute path or a link
            raise RecordError(f"{len(outside)} of the images {path.name} names lie outside its folder (e.g. "
                              f"{outside[0]!r}): name them relative to {path.parent}, inside it")
        absent = [n for n in truth.images["file_name"] if not (path.parent / n).is_file()]
        if absent:
            raise RecordError(f"{len(absent)} of the images {path.name} names are not beside it (e.g. "
                              f"{path.parent / absent[0]}): its file names are read from its folder")
        train_keys = set()
        if objects:  # the training split's images, by the keys the annotation audit matches on
            samples = project.samples()
            train_keys = set(project.objects()["image_key"].reindex(samples.index[samples["split"] == "train"])
                             .dropna())
        count, in_project = len(truth.images), int(truth.images["file_name"].isin(train_keys).sum())
        training = str(path)
    # 3. Recorded.
    recorded = RecordedModel(name, spec, training=training)
    record_model(project, recorded, author=author)
    return Recorded(recorded, count, in_project)

