"""Retraining with new data weighted by lambda (loss = L(original) + lambda * L(new)): a linear head on frozen
features for any model, fine-tuning for a network the project holds (the demo CNN)."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from hibug_core.demo.shapes_model import FineTuneConfig
from hibug_core.embeddings.compute import MODEL_META, MODEL_PREFIX
from hibug_core.errors import HibugError, check_fields
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.registry import Registry

RETRAIN_METHODS = Registry("retraining method")
NETWORK_DIR = "models"


class RetrainError(HibugError):
    """Retraining that cannot run (no network to fine-tune, unlabeled new data, missing embeddings)."""


@dataclass(frozen=True)
class RetrainConfig:
    # fine-tune: the held network, further; from scratch: a new network of its architecture, trained as it was;
    # linear head: on frozen features, for any model.
    method: str = "fine-tune"
    # Weight of the new data's mean loss against the original data's. None: n_new / n_original, as if the new images
    # were simply added to the training set (HiBug); Chegini and Feizi tune it (1.0 weighs both sets equally).
    lam: float | None = None
    features: str = "model"  # linear head: "model" (the network's penultimate layer) or an encoder (stored embeddings)
    regularisation: float = 1.0  # linear head: inverse L2 strength (scikit-learn's C)
    fine_tune: FineTuneConfig = field(default_factory=FineTuneConfig)
    seed: int = 0

    def __post_init__(self):
        check_fields(self, {
            "method": (self.method in RETRAIN_METHODS.names(), f"one of {', '.join(RETRAIN_METHODS.names())}"),
            "lam": (self.lam is None or self.lam >= 0, "None (as if added) or 0 or more"),
            "regularisation": (self.regularisation > 0, "above 0")})


def project_network(project, model: str):
    """(network, classes, train config) of the project's copy of `model`, or None when it holds no network for it."""
    from hibug_core.demo.build import ASSET_CHECKPOINT, MODEL_NAME
    from hibug_core.demo.shapes_model import load_network

    path = project.folder / NETWORK_DIR / f"{model}.pt"
    if not path.exists() and model == MODEL_NAME and "demo" in project.meta():
        path = ASSET_CHECKPOINT  # a demo built before projects kept their own copy
    if not path.exists():
        return None
    return load_network(path)


def weighted_linear_head(features: np.ndarray, labels: np.ndarray, new_features: np.ndarray, new_labels: np.ndarray,
                         lam: float, *, regularisation: float = 1.0, seed: int = 0):
    """A multinomial logistic regression fitted to mean L(original) + lam * mean L(new): each new sample weighs
    lam * n_original / n_new, so the regularisation stays that of the original data alone."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x = np.concatenate([features, new_features]) if len(new_labels) else features
    y = np.concatenate([labels, new_labels]) if len(new_labels) else labels
    weights = np.ones(len(y))
    if len(new_labels):
        weights[len(labels):] = lam * len(labels) / len(new_labels)
    head = make_pipeline(StandardScaler(), LogisticRegression(C=regularisation, max_iter=2000, random_state=seed))
    head.fit(x, y, logisticregression__sample_weight=weights)
    return head


class ImageCache:
    """Pixels of the project's images as the network reads them, loaded once per run of repairs."""

    def __init__(self, size: int = 64):
        self.size = size
        self._pixels: dict[str, np.ndarray] = {}

    def __call__(self, paths) -> np.ndarray:
        from hibug_core.demo.shapes_model import read_images

        missing = [p for p in dict.fromkeys(paths) if p not in self._pixels]
        for path, pixels in zip(missing, read_images(missing, self.size)):
            self._pixels[path] = pixels
        if not len(paths):
            return np.zeros((0, self.size, self.size, 3), np.uint8)
        return np.stack([self._pixels[p] for p in paths])


@dataclass
class RetrainInputs:
    """What every retraining method gets, checked: the training split, the new samples, classes and lambda."""

    project: object
    config: "RetrainConfig"
    samples: pd.DataFrame
    train: pd.DataFrame
    new: pd.DataFrame
    held: tuple | None  # (network, classes, train config) of the project's copy of the model
    classes: list[str]
    y: np.ndarray
    y_new: np.ndarray
    lam: float
    images: "ImageCache"
    progress: ProgressCallback
    adapter: object | None = None  # the adapted network of a model `hibug predict` ran (instead of `held`)
    outputs: dict | None = None  # filled by the method: e.g. the repaired checkpoint's path


def retrain(project, model: str, new_ids, config: RetrainConfig | None = None, *, images: ImageCache | None = None,
            progress: ProgressCallback = no_progress,
            outputs: dict | None = None) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Retrain `model` on its labelled training split plus the samples `new_ids` (labelled), weighted by lambda; returns
    (sample ids, class probabilities, classes) for every sample in the project. `outputs`, when given, receives what
    else the method made ("checkpoint": the repaired network's file, for networks `hibug predict` ran)."""
    # 1. Check inputs (the method is checked when the config is built): labels of the new data, a training split,
    # a network where one is needed.
    config = config or RetrainConfig()
    samples = project.samples()
    train = samples[(samples["split"] == "train") & samples["label"].notna()]
    new = samples.loc[np.asarray(new_ids, dtype=np.int64)]
    unlabeled = new.index[new["label"].isna()]
    if len(unlabeled):
        raise RetrainError(f"{len(unlabeled)} of the new samples have no label (e.g. sample {unlabeled[0]}): export "
                           "the selection, label it, and import the labels with a manifest before retraining")
    if train.empty:
        raise RetrainError("the project has no labelled 'train' split to retrain on")
    held = project_network(project, model)
    recorded = held is None and MODEL_META + model in project.meta()  # a network `hibug predict` ran
    if recorded and config.method == "linear head" and config.features == "model":
        config = replace(config, features=MODEL_PREFIX + model)  # the features predict stored for it
    adapter = _recorded_adapter(project, model) if recorded and config.method != "linear head" else None
    if held is None and adapter is None and (config.method != "linear head" or config.features == "model"):
        raise RetrainError(f"the project holds no network for '{model}' (looked for {NETWORK_DIR}/{model}.pt); "
                           "retrain a linear head on stored embeddings instead (features = an encoder), or run the "
                           "model with `hibug predict` so its own features are stored")
    # 2. Map labels to the model's classes.
    if adapter is not None:
        from hibug_core.models.predict import match_classes

        classes = match_classes(adapter.classes, sorted(samples["label"].dropna().astype(str).unique()), adapter.spec)
    elif held is not None and (config.method != "linear head" or config.features == "model"):
        classes = held[1]
    else:
        classes = sorted(set(train["label"]) | set(new["label"]))
    index = {c: i for i, c in enumerate(classes)}
    unknown = sorted(set(train["label"]) - set(index) | set(new["label"]) - set(index))
    if unknown:
        raise RetrainError(f"labels {', '.join(map(str, unknown))} are not classes of '{model}' ({', '.join(classes)})")
    # 3. Retrain with the method; predict every sample.
    inputs = RetrainInputs(project, config, samples, train, new, held, classes, train["label"].map(index).to_numpy(),
                           new["label"].map(index).to_numpy(),
                           config.lam if config.lam is not None else len(new) / len(train), images or ImageCache(),
                           progress, adapter, outputs if outputs is not None else {})
    return samples.index.to_numpy(), RETRAIN_METHODS.build(config.method, inputs=inputs), classes


def _recorded_adapter(project, model: str):
    """The adapted network of a model `hibug predict` ran, loaded from its spec; RetrainError when its weights
    changed since (the recorded predictions would not be its)."""
    import json

    from hibug_core.models.registry import load_model

    recorded = json.loads(project.meta()[MODEL_META + model])
    adapter = load_model(recorded["spec"])
    if adapter.key != recorded["weights"]:
        raise RetrainError(f"the weights behind {recorded['spec']} changed since '{model}' was predicted; run "
                           "`hibug predict` again under a new name and repair that model")
    return adapter


def _tune_adapted(inputs: RetrainInputs, from_scratch: bool) -> np.ndarray:
    """Fine-tune (or retrain from scratch) a network `hibug predict` ran; early stopping on the labelled val split."""
    from hibug_core.embeddings.compute import EmbedConfig, encode_paths
    from hibug_core.models.adapter import ModelAdapter
    from hibug_core.models.finetune import TuneConfig, fine_tune

    adapter, config, samples = inputs.adapter, inputs.config, inputs.samples
    val = samples[(samples["split"] == "val") & samples["label"].notna()]
    index = {c: i for i, c in enumerate(inputs.classes)}
    schedule = config.fine_tune
    tuned = fine_tune(adapter, list(inputs.train["image_path"]), inputs.y, list(inputs.new["image_path"]),
                      inputs.y_new, inputs.lam, folder=inputs.project.folder / NETWORK_DIR / "tuning",
                      val_paths=list(val["image_path"]) or None, val_labels=val["label"].map(index).to_numpy(),
                      config=TuneConfig(epochs=schedule.epochs, batch_size=schedule.batch_size,
                                        learning_rate=schedule.learning_rate, seed=config.seed,
                                        from_scratch=from_scratch), progress=inputs.progress)
    inputs.outputs["checkpoint"] = str(tuned.checkpoint)
    repaired = ModelAdapter(adapter.spec, tuned.network, adapter.transform, adapter.classes,
                            input_size=adapter.input_size, device=adapter.device)
    distinct = samples.drop_duplicates("content_hash")
    chunks = []
    encode_paths(repaired, list(distinct["image_path"]), lambda start, stop, arrays, ok: chunks.append(
        arrays["probabilities"]), EmbedConfig(save_every=1 << 30), inputs.progress, stage="predicting after repair")
    by_content = pd.DataFrame(np.concatenate(chunks), index=distinct["content_hash"].to_numpy())
    return by_content.loc[samples["content_hash"].to_numpy()].to_numpy()


@RETRAIN_METHODS.register("fine-tune", "the model's own network trained further on the training split plus the new "
                          "data weighted by lambda (the project's network, or one `hibug predict` ran; early "
                          "stopping on val, a checkpoint per epoch)")
def _fine_tune(*, inputs: RetrainInputs, from_scratch: bool = False) -> np.ndarray:
    if inputs.adapter is not None:
        return _tune_adapted(inputs, from_scratch)
    from hibug_core.demo.shapes_model import build_network, fine_tune_shape_cnn, predict_probabilities

    network, _, trained_as = inputs.held
    schedule = inputs.config.fine_tune
    if from_scratch:
        import torch

        torch.manual_seed(inputs.config.seed)
        network = build_network(len(inputs.classes))
        schedule = replace(schedule, epochs=trained_as.epochs, learning_rate=trained_as.learning_rate)
    images = inputs.images
    tuned = fine_tune_shape_cnn(network, images(list(inputs.train["image_path"])), inputs.y,
                                images(list(inputs.new["image_path"])), inputs.y_new, inputs.lam, schedule,
                                trained_as.resolution, inputs.progress)
    return predict_probabilities(tuned, images(list(inputs.samples["image_path"])), trained_as.resolution)


@RETRAIN_METHODS.register("from scratch", "a new network of the model's architecture, trained as the model was, on "
                          "the training split plus the new data (needs the network in the project)")
def _from_scratch(*, inputs: RetrainInputs) -> np.ndarray:
    return _fine_tune(inputs=inputs, from_scratch=True)


@RETRAIN_METHODS.register("linear head", "a linear classifier on frozen features (the network's or an encoder's "
                          "stored embeddings): works for any model")
def _linear_head(*, inputs: RetrainInputs) -> np.ndarray:
    features = _features(inputs.project, inputs.samples, inputs.config.features, inputs.held, inputs.images,
                         inputs.progress)
    head = weighted_linear_head(features.loc[inputs.train.index].to_numpy(), inputs.y,
                                features.loc[inputs.new.index].to_numpy(), inputs.y_new, inputs.lam,
                                regularisation=inputs.config.regularisation, seed=inputs.config.seed)
    probabilities = np.zeros((len(inputs.samples), len(inputs.classes)))
    probabilities[:, head.classes_] = head.predict_proba(features.to_numpy())
    return probabilities


def _features(project, samples: pd.DataFrame, source: str, held, images: ImageCache,
              progress: ProgressCallback) -> pd.DataFrame:
    """Frozen features of every sample: the held network's penultimate layer, or an encoder's stored embeddings."""
    if source == "model":
        from hibug_core.demo.shapes_model import network_features

        network, _, trained_as = held
        values = network_features(network, images(list(samples["image_path"])), trained_as.resolution)
    else:
        from hibug_core.embeddings.compute import embed_project

        values = embed_project(project, source, progress=progress).for_probe()
    return pd.DataFrame(np.asarray(values, dtype=np.float32), index=samples.index)
