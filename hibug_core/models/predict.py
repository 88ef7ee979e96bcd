"""Running the user's model over a project's images: batched and resumable (outputs stored per image content as they
come), then recorded as a model of the project with its probabilities and its own penultimate features."""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from functools import partial

import numpy as np
import pandas as pd

from hibug_core.embeddings.cache import ContentCache
from hibug_core.embeddings.compute import EmbedConfig, encode_paths, model_cache
from hibug_core.errors import HibugError, unreadable_images
from hibug_core.models.adapter import ModelAdapter
from hibug_core.models.registry import absolute_spec, load_model
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.store.recorded_models import RecordedModel, record_model

logger = logging.getLogger(__name__)


class PredictError(HibugError):
    """A prediction that cannot run as asked (classes that do not match, a name taken, unreadable images)."""


@dataclass
class Prediction:
    model: str  # the name it is recorded under
    spec: str
    samples: int
    computed: int  # images run now (the rest were stored by an earlier, interrupted run)
    accuracy: float | None  # on labelled samples
    extra_classes: list[str]  # model classes no sample is labelled with

    def summary(self) -> str:
        scored = f"; accuracy {self.accuracy:.1%} on the labelled ones" if self.accuracy is not None else ""
        extra = (f" The model also predicts {len(self.extra_classes)} class(es) no image is labelled with "
                 f"(e.g. {self.extra_classes[0]}).") if self.extra_classes else ""
        return (f"{self.model}: predictions for {self.samples:,} images ({self.computed:,} run now){scored}; stored "
                f"as a model of the project with its features.{extra}")


def _normal(name: str) -> str:
    return re.sub(r"[\s_\-]+", " ", str(name)).strip().lower()


def match_classes(model_classes: list[str], labels: list[str], spec: str) -> list[str]:
    """The model's classes spelt as the project's labels (matched exactly, else ignoring case, spaces, '_' and '-');
    PredictError when a label has no class, naming both sides so the user can fix the class list."""
    by_normal = {_normal(label): label for label in labels}
    mapped = [c if c in labels else by_normal.get(_normal(c), c) for c in model_classes]
    missing = sorted(set(labels) - set(mapped))
    if missing:
        unmatched = [c for c in model_classes if (c if c in labels else by_normal.get(_normal(c))) is None]
        raise PredictError(f"{spec}: the project's labels {', '.join(missing[:8])}{' ...' if len(missing) > 8 else ''}"
                           f" match none of the model's classes (unmatched model classes: "
                           f"{', '.join(unmatched[:8]) or 'none'}); give the model's class names in the project's "
                           "spelling (the checkpoint's 'classes' or its classes.txt)")
    return mapped


def default_name(spec: str) -> str:
    """A readable model name from a spec: the architecture, the folder or the function."""
    kind, _, rest = spec.partition(":")
    parts = [p for p in re.split(r"[:/\\]", rest) if p]
    stem = parts[0] if kind in ("timm", "torchvision") else parts[-1] if parts else kind
    return re.sub(r"\.(pt|pth|bin|safetensors|ckpt)$", "", stem) or kind


def outputs_cache(project, adapter: ModelAdapter) -> ContentCache:
    """Per image content: probabilities, features and embedding of this model's weights (float32)."""
    return ContentCache(project, f"models/{adapter.key}", dtype=np.float32)


def predict_project(project, spec: str | ModelAdapter, *, name: str | None = None, splits=None, sample_ids=None,
                    config: EmbedConfig = EmbedConfig(), progress: ProgressCallback = no_progress,
                    author: str | None = None, ray=None) -> Prediction:
    """Run the model on the project's images (all, `splits`, or `sample_ids`) and record it as model `name`. Images
    whose outputs an earlier run stored are not run again, so a killed or cancelled run resumes where it stopped.
    ray: RayOptions to run it as Ray Data batch inference on a cluster (each actor loads the model from its spec,
    resolved under the project folder), into the same cache."""
    # 1. Check inputs (the caller checked the task can predict): the model loads, its classes match the labels, the
    # name is free.
    adapter = load_model(spec) if isinstance(spec, str) else spec
    if not isinstance(adapter, ModelAdapter):
        raise PredictError(f"{adapter.spec} is a model of objects; hibug runs classifiers on a project's images "
                           "(import a detector's results as a COCO results file)")
    name = (name or default_name(adapter.spec)).strip()
    if not name:
        raise PredictError("give the model a name (--name)")
    if name in project.models():
        raise PredictError(f"a model named '{name}' is already in this project; choose another --name")
    samples = project.samples(sample_ids=project.split_ids(splits) if sample_ids is None else sample_ids)
    if samples.empty:
        raise PredictError(f"no images in the split(s) {', '.join(splits or [])}")
    labels = sorted(samples["label"].dropna().astype(str).unique())
    classes = match_classes(adapter.classes, labels, adapter.spec)
    # 2. Run the model on the images with nothing stored yet, storing every chunk as it is done.
    cache = outputs_cache(project, adapter)
    ran = run_model(project, adapter, samples, config=config, progress=progress, ray=ray)
    # 3. Record the model: predictions, confidence, score against the labels; where its outputs and weights live.
    progress("recording the predictions", 0, 1)
    hashes = samples["content_hash"].to_numpy()
    probabilities = cache.get(hashes, "probabilities")
    project.add_predictions(name, samples.index.to_numpy(), probabilities, classes, author=author,
                            note={"spec": adapter.spec, "weights": adapter.key})
    record_model(project, RecordedModel(name, adapter.spec, adapter.key), author=author)
    progress("recording the predictions", 1, 1)
    predicted = np.asarray(classes, dtype=object)[probabilities.argmax(axis=1)]
    labelled = samples["label"].notna().to_numpy()
    accuracy = float((predicted[labelled] == samples["label"].to_numpy()[labelled]).mean()) if labelled.any() else None
    return Prediction(name, adapter.spec, len(samples), ran, accuracy, sorted(set(classes) - set(labels)))


def run_model(project, adapter: ModelAdapter, samples: pd.DataFrame, *, config: EmbedConfig = EmbedConfig(),
              progress: ProgressCallback = no_progress, ray=None) -> int:
    """Run the model on those of `samples` whose outputs (probabilities, features, embedding) are not stored yet,
    storing every chunk as it is done; returns how many images it ran."""
    cache = outputs_cache(project, adapter)
    todo, paths = cache.missing(samples)
    if todo:
        def store(start: int, stop: int, arrays: dict[str, np.ndarray], readable: np.ndarray) -> None:
            cache.add([h for h, ok in zip(todo[start:stop], readable) if ok],
                      {k: v[readable] for k, v in arrays.items()})

        logger.info("running %s on %d images", adapter.spec, len(todo))
        if ray is not None:
            from hibug_core.embeddings.ray_backend import run_on_ray

            unreadable = run_on_ray(partial(load_model, absolute_spec(adapter.spec, project.folder)), todo, paths,
                                    cache, options=ray, progress=progress, stage="running the model on Ray")
        else:
            readable = encode_paths(adapter, paths, store, config, progress, stage="running the model")
            unreadable = [p for p, ok in zip(paths, readable) if not ok]
        if unreadable:
            raise PredictError(unreadable_images(unreadable, "the outputs of the others"))
    return len(todo)


def model_outputs(project, model: str, kind: str = "features", sample_ids=None) -> pd.DataFrame:
    """Stored outputs ("features", "embedding" or "probabilities") of a model recorded by predict_project, one row
    per sample."""
    samples = project.samples(sample_ids=sample_ids)
    return pd.DataFrame(model_cache(project, model).get(samples["content_hash"].to_numpy(), kind), index=samples.index)
