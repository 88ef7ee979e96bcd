"""Retraining with new data weighted by lambda (loss = L(original) + lambda * L(new)): a linear head on frozen
features for any model, fine-tuning (or retraining from scratch) for a network hibug can run: one `hibug predict`
ran (the demo CNN is run that way when the demo is built) -- every network through the same adapter and loop."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import ClassVar

import numpy as np
import pandas as pd

from hibug_core.bounds import Bound, check_bounds
from hibug_core.embeddings.compute import model_cache, own_features
from hibug_core.errors import HibugError
from hibug_core.models.finetune import CLASSIFIER_EPOCHS, DecodedImages, TuneConfig
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.registry import Registry
from hibug_core.repair.pool_outputs import OWN_FEATURES
from hibug_core.safe_files import folder_within
from hibug_core.store.recorded_models import recorded_model

RETRAIN_METHODS = Registry("retraining method")
THE_NETWORK = "the model's own network"  # a method that runs and trains it (Entry.needs)
FROZEN_FEATURES = "frozen features"  # a method that trains on stored features only
NETWORK_DIR = "models"
SCRATCH_RATE = 1e-3  # training from scratch, when the network's own recipe is unknown


class RetrainError(HibugError):
    """Retraining that cannot run (no network to fine-tune, unlabeled new data, missing embeddings)."""


@dataclass(frozen=True)
class RetrainConfig:
    # fine-tune: the model's own network (one hibug can run), further; from scratch: a new network of its
    # architecture, trained as it was where its recipe is known; linear head: on frozen features, for any model.
    method: str = "fine-tune"
    # Weight of the new data's mean loss against the original data's. None: n_new / n_original, as if the new images
    # were simply added to the training set (HiBug); Chegini and Feizi tune it (1.0 weighs both sets equally).
    lam: float | None = None
    features: str = OWN_FEATURES  # linear head: the network's penultimate layer, or an encoder (stored embeddings)
    regularisation: float = 1.0  # linear head: inverse L2 strength (scikit-learn's C)
    fine_tune: TuneConfig = field(default_factory=TuneConfig)
    seed: int = 0

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "lam": Bound("weight of the new data's mean loss (default: as if simply added)", ge=0, optional=True),
        "regularisation": Bound("linear head: inverse L2 strength", gt=0)}

    def __post_init__(self):
        check_bounds(self, self.BOUNDS, {
            "method": (self.method in RETRAIN_METHODS.names(), f"one of {', '.join(RETRAIN_METHODS.names())}")})


def model_network(project, model: str):
    """The adapted network behind `model`, or None for imported predictions: the spec `hibug predict` (or the demo
    build) recorded, loaded with relative paths under the project folder; RetrainError when its weights changed
    since (the recorded predictions would not be its)."""
    from hibug_core.models.registry import load_model

    recorded = recorded_model(project, model)
    if recorded is None:
        own = project.folder / NETWORK_DIR / f"{model}.pt"  # a demo built before it recorded its network's spec
        return load_model(f"shape-cnn:{NETWORK_DIR}/{model}.pt", root=project.folder) if own.exists() else None
    adapter = load_model(recorded.spec, root=project.folder)
    if adapter.key != recorded.weights:
        raise RetrainError(f"the weights behind {recorded.spec} changed since '{model}' was predicted; run "
                           "`hibug predict` again under a new name and repair that model")
    return adapter


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


@dataclass
class RetrainInputs:
    """What every retraining method gets, checked: the training split, the new samples, classes and lambda."""

    project: object
    config: RetrainConfig
    samples: pd.DataFrame
    train: pd.DataFrame
    new: pd.DataFrame
    adapter: object | None  # the model's adapted network (None: imported predictions, a linear head only)
    classes: list[str]
    y: np.ndarray
    y_new: np.ndarray
    lam: float
    images: DecodedImages
    progress: ProgressCallback
    outputs: dict  # filled by the method: e.g. the repaired checkpoint's path


def retrain(project, model: str, new_ids, config: RetrainConfig | None = None, *,
            images: DecodedImages | None = None,
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
    needs = RETRAIN_METHODS.get(config.method).needs
    adapter = model_network(project, model) if THE_NETWORK in needs else None
    if FROZEN_FEATURES in needs and config.features == OWN_FEATURES:
        encoder = own_features(project, model)
        if encoder is None:
            raise RetrainError(f"'{model}' has no stored features (imported predictions, or a demo built by an older "
                               "hibug); retrain a linear head on an encoder's embeddings (features = an encoder), or "
                               "run the model with `hibug predict` so its own features are stored")
        config = replace(config, features=encoder)
        if model_cache(project, model).missing_rows(samples).shape[0]:
            # images added since it ran (generated ones) get their features from its network now
            from hibug_core.models.predict import run_model

            network = model_network(project, model)
            if network is not None:
                run_model(project, network, samples, progress=progress)
    if adapter is None and THE_NETWORK in needs:
        raise RetrainError(f"hibug cannot run '{model}' (imported predictions): run your network with `hibug predict "
                           "--model SPEC` to repair it, or retrain a linear head on stored embeddings")
    if train["label"].nunique() < 2 and new["label"].nunique() < 2 and set(train["label"]) >= set(new["label"]):
        raise RetrainError(f"the labelled 'train' split and the new data hold one class only "
                           f"('{train['label'].iat[0]}'): a classifier learns from two or more; import training "
                           "images of the other classes")
    # 2. Map labels to the model's classes.
    if adapter is not None:
        from hibug_core.models.predict import match_classes

        classes = match_classes(adapter.classes, sorted(samples["label"].dropna().astype(str).unique()), adapter.spec)
    else:
        classes = sorted(set(train["label"]) | set(new["label"]))
    index = {c: i for i, c in enumerate(classes)}
    unknown = sorted(set(train["label"]) - set(index) | set(new["label"]) - set(index))
    if unknown:
        raise RetrainError(f"labels {', '.join(map(str, unknown))} are not classes of '{model}' ({', '.join(classes)})")
    # 3. Retrain with the method; predict every sample.
    inputs = RetrainInputs(project, config, samples, train, new, adapter, classes, train["label"].map(index).to_numpy(),
                           new["label"].map(index).to_numpy(),
                           config.lam if config.lam is not None else len(new) / len(train),
                           images if images is not None else DecodedImages(), progress,
                           outputs if outputs is not None else {})
    return samples.index.to_numpy(), RETRAIN_METHODS.build(config.method, inputs=inputs), classes


@RETRAIN_METHODS.register("fine-tune", "the model's own network (one `hibug predict` ran, or the demo CNN) trained "
                          "further on the training split plus the new data weighted by lambda (early stopping on val, "
                          "a checkpoint per epoch)", needs=(THE_NETWORK,))
def _fine_tune(*, inputs: RetrainInputs, from_scratch: bool = False) -> np.ndarray:
    from hibug_core.models.finetune import fine_tune, predict_paths

    adapter, config, samples = inputs.adapter, inputs.config, inputs.samples
    val = samples[(samples["split"] == "val") & samples["label"].notna()]
    index = {c: i for i, c in enumerate(inputs.classes)}
    schedule = replace(config.fine_tune, seed=config.seed)
    if from_scratch:  # as the network was trained, where its recipe is known
        recipe = adapter.recipe
        schedule = replace(schedule, from_scratch=True,
                           epochs=recipe.get("epochs", schedule.epochs or CLASSIFIER_EPOCHS),
                           batch_size=recipe.get("batch_size", schedule.batch_size),
                           learning_rate=schedule.learning_rate or recipe.get("learning_rate", SCRATCH_RATE))
    tuned = fine_tune(adapter, list(inputs.train["image_path"]), inputs.y, list(inputs.new["image_path"]),
                      inputs.y_new, inputs.lam,
                      folder=folder_within(inputs.project.folder, inputs.project.folder / NETWORK_DIR / "tuning"),
                      val_paths=list(val["image_path"]) or None, val_labels=val["label"].map(index).to_numpy(),
                      config=schedule, images=inputs.images, progress=inputs.progress)
    inputs.outputs["checkpoint"] = str(tuned.checkpoint)
    inputs.progress("predicting after repair", 0, 1)
    distinct = samples.drop_duplicates("content_hash")
    probabilities = predict_paths(adapter, tuned.network, list(distinct["image_path"]), inputs.images)
    by_content = pd.DataFrame(probabilities, index=distinct["content_hash"].to_numpy())
    inputs.progress("predicting after repair", 1, 1)
    return by_content.loc[samples["content_hash"].to_numpy()].to_numpy()


@RETRAIN_METHODS.register("from scratch", "a new network of the model's architecture on the training split plus the "
                          "new data, trained as the model was where its recipe is known (the demo CNN's is)",
                          needs=(THE_NETWORK,))
def _from_scratch(*, inputs: RetrainInputs) -> np.ndarray:
    return _fine_tune(inputs=inputs, from_scratch=True)


@RETRAIN_METHODS.register("linear head", "a linear classifier on frozen features (the network's or an encoder's "
                          "stored embeddings): works for any model", needs=(FROZEN_FEATURES,))
def _linear_head(*, inputs: RetrainInputs) -> np.ndarray:
    features = _features(inputs.project, inputs.samples, inputs.config.features, inputs.progress)
    head = weighted_linear_head(features.loc[inputs.train.index].to_numpy(), inputs.y,
                                features.loc[inputs.new.index].to_numpy(), inputs.y_new, inputs.lam,
                                regularisation=inputs.config.regularisation, seed=inputs.config.seed)
    probabilities = np.zeros((len(inputs.samples), len(inputs.classes)))
    probabilities[:, head.classes_] = head.predict_proba(features.to_numpy())
    return probabilities


def _features(project, samples: pd.DataFrame, source: str, progress: ProgressCallback) -> pd.DataFrame:
    """Frozen features of every sample: an encoder's stored embeddings, or model:<name>'s own stored features."""
    from hibug_core.embeddings.compute import MODEL_PREFIX, embed_project
    from hibug_core.errors import TaggingError

    try:
        values = embed_project(project, source, progress=progress).for_probe()
    except TaggingError:
        if not source.startswith(MODEL_PREFIX):
            raise
        # A model's own features are stored by the run that predicted; images added since (generated ones) have none,
        # and `hibug embed` cannot make them.
        raise RetrainError(f"some images have no features of '{source[len(MODEL_PREFIX):]}': they were added after "
                           "hibug ran the model, and its network cannot be loaded here to run them: retrain the "
                           "linear head on an encoder's embeddings instead (features = an encoder, e.g. conse, after "
                           "`hibug embed`), or record the model's network with `hibug predict`") from None
    return pd.DataFrame(np.asarray(values, dtype=np.float32), index=samples.index)
