"""How a project records a model under test that hibug can run, whatever its task: one meta entry per model with the
spec that loads it (files under the project folder), the weights' key when hibug ran it on the project's images, and,
for a model of objects, the annotations it was trained on (what retraining starts from)."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass

MODEL_META = "model spec:"  # project meta key prefix, + the model's name
LEGACY_DETECTOR_META = "detector:"  # how older projects named a detector ({"kind", "checkpoint", ...})
POOL_LABELS_META = "pool labels"  # project meta: COCO annotations of the pool images (what labelling returned)


@dataclass(frozen=True)
class RecordedModel:
    name: str
    spec: str  # a model registry spec; relative file paths are under the project folder
    weights: str | None = None  # the adapter's key when hibug ran it (its stored outputs are that run's)
    training: str | None = None  # a model of objects: COCO instances of what it was trained on


def record_model(project, recorded: RecordedModel, *, author: str | None = None) -> None:
    fields = {k: v for k, v in asdict(recorded).items() if k != "name" and v is not None}
    project.set_meta(MODEL_META + recorded.name, json.dumps(fields), author=author)


def recorded_model(project, name: str) -> RecordedModel | None:
    """What the project recorded about `name`, or None when only its outputs were imported."""
    meta = project.meta()
    if MODEL_META + name in meta:
        stored = json.loads(meta[MODEL_META + name])
        return RecordedModel(name, stored["spec"], stored.get("weights"), stored.get("training"))
    if LEGACY_DETECTOR_META + name in meta:
        stored = json.loads(meta[LEGACY_DETECTOR_META + name])
        return RecordedModel(name, f"{stored['kind']}:{stored['checkpoint']}", training=stored.get("training"))
    return None
