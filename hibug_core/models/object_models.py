"""Models of objects hibug can run and retrain (adapters the model registry builds, e.g. the zoo's scene detector),
and the training sets they learn from (COCO annotations)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hibug_core.errors import HibugError
from hibug_core.models.adapter import ModelUnderTest
from hibug_core.progress import ProgressCallback, no_progress


class DetectorError(HibugError):
    """A detector hibug cannot load, retrain or run."""


@dataclass(frozen=True)
class TrainingSet:
    """Images (PIL) and per image (boxes (n, 4) x/y/w/h in pixels, class names); for people also their keypoints
    (n, k, 3: x, y and COCO's visibility flag); for objects outlined by masks their masks (n, height, width bool)."""

    images: list
    objects: list[tuple[np.ndarray, list[str]]]
    keypoints: list[np.ndarray] | None = None
    masks: list[np.ndarray] | None = None

    def __add__(self, other: TrainingSet) -> TrainingSet:
        def joined(mine, theirs):
            return None if mine is None and theirs is None else (mine or []) + (theirs or [])

        return TrainingSet(self.images + other.images, self.objects + other.objects,
                           joined(self.keypoints, other.keypoints), joined(self.masks, other.masks))

    def people(self) -> list[tuple[np.ndarray, list[str], np.ndarray]]:
        """Per image (boxes, class names, keypoints), as a keypoint model learns from them."""
        return [(boxes, names, points) for (boxes, names), points in zip(self.objects, self.keypoints or [])]


def coco_training_set(path: Path, file_names: list[str] | None = None) -> TrainingSet:
    """Images and boxes (and keypoints, when its categories name them; masks, when its objects carry them) of a COCO
    file (or of its images `file_names`, in that order), crowd regions left out; images are read under the file's
    folder."""
    from hibug_core.image_loader import open_image
    from hibug_core.objects.coco import read_ground_truth
    from hibug_core.objects.masks import pixels

    truth = read_ground_truth(path)
    images = truth.images.reset_index()
    if file_names is not None:
        by_name = images.set_index("file_name")
        missing = [name for name in file_names if name not in by_name.index]
        if missing:
            raise DetectorError(f"{len(missing)} of the chosen images have no annotations in {path} (e.g. "
                                f"{missing[0]}): label them and add them to that file")
        images = by_name.loc[file_names].reset_index()
    objects = truth.annotations[truth.annotations["iscrowd"] == 0]
    grouped = {image_id: group for image_id, group in objects.groupby("image_id")}
    empty = objects.iloc[:0]  # an image nobody annotated an object in: no boxes, keypoints or masks
    folder = Path(truth.source).parent
    count = max((len(names) for names in truth.keypoints.values()), default=0)
    outlined = truth.has_masks
    record_of = {record["id"]: record for record in truth.dataset["annotations"]} if outlined else {}
    loaded, targets, points, masks = [], [], [], []
    for image_id, name in zip(images["image_id"], images["file_name"]):
        group = grouped.get(image_id, empty)
        loaded.append(open_image(folder / name))
        targets.append((group[["x", "y", "w", "h"]].to_numpy(float),
                        [truth.categories[c] for c in group["category_id"]]))
        points.append(np.array([p if isinstance(p, list) else [0.0] * (3 * count) for p in group["keypoints"]],
                               dtype=float).reshape(len(group), count, 3))
        if outlined:
            width, height = loaded[-1].size
            masks.append(np.array([pixels(record_of[i]["segmentation"], width, height) for i in group["id"]],
                                  dtype=bool).reshape(len(group), height, width))
    return TrainingSet(loaded, targets, points if count else None, masks if outlined else None)


class ObjectModelAdapter(ModelUnderTest):
    """A model of objects as the model registry gives it (the ModelUnderTest contract): predict finds objects (people
    with their keypoints), features pool the top level of its backbone's feature pyramid, fine_tune learns from
    TrainingSets, save writes a checkpoint its family loads."""

    def features(self, images: list, *, network=None) -> np.ndarray:
        import torch

        from hibug_core.models.zoo.fitting import compute_device, image_batch, on_device

        network = network or self.network
        device = compute_device()
        network.to(device).eval()
        with torch.no_grad():
            batch, _ = network.transform(on_device(image_batch(images), None, device)[0])
            levels = network.backbone(batch.tensors)
            return levels[list(levels)[-1]].mean(dim=(2, 3)).cpu().numpy().astype(np.float32)

    needs: tuple[str, str] | None = None  # the TrainingSet field the family learns from beside boxes, and its name
    draws = ("box",)

    def fine_tune(self, data: TrainingSet, new: TrainingSet, *, lam: float | None, tune,
                  progress: ProgressCallback = no_progress, **options):
        """A copy trained further on `data` and `new` with the family's schedule (tune's epochs, peak rate and seed
        where set): simply added (lam None), or a batch of each per step with the new one's loss weighted by lam."""
        from dataclasses import replace

        if self.needs and getattr(data, self.needs[0]) is None:
            raise DetectorError(f"this model learns from objects with {self.needs[1]}: its training annotations have "
                                "none")
        config = replace(self.config, epochs=tune.epochs or self.config.epochs,
                         learning_rate=tune.learning_rate or self.config.learning_rate, seed=tune.seed)
        if lam is None:
            data, new = data + new, TrainingSet([], [])
        return self._train(data, new, config, progress, lam or 0.0)

    def _train(self, data: TrainingSet, new: TrainingSet, config, progress: ProgressCallback, lam: float):
        """The family's training from the network's weights (new weighted by lam in every step)."""
        raise NotImplementedError


# the model registry's families of object models
OBJECT_FAMILIES = ("scene-fcos", "scene-keypoints", "scene-masks")


class SceneFcos(ObjectModelAdapter):
    """The zoo's scene detector (hibug_core.models.zoo.scene_fcos): loaded from its checkpoint, fine-tuned with its
    own one-cycle schedule, run at its own score threshold."""

    def __init__(self, spec: str, checkpoint: Path):
        from hibug_core.models.zoo.scene_fcos import load_checkpoint

        self.spec = spec
        self.network, self.classes, self.config = load_checkpoint(checkpoint)

    def _train(self, data: TrainingSet, new: TrainingSet, config, progress: ProgressCallback, lam: float):
        from hibug_core.models.zoo.scene_fcos import train_detector

        return train_detector(data.images, data.objects, self.classes, config, progress, start_from=self.network,
                              new=(new.images, new.objects), lam=lam)

    def save(self, network, path: Path, **extra) -> Path:
        """The network as a checkpoint this family loads (the training fingerprint says it was fine-tuned)."""
        from hibug_core.models.zoo.scene_fcos import save_detector

        save_detector(path, network, self.classes, self.config, "fine-tuned")
        return path

    def predict(self, images: list, *, network=None, progress: ProgressCallback = no_progress) -> list:
        from hibug_core.models.zoo.scene_fcos import detect

        return detect(network or self.network, images, self.classes, progress=progress)


class SceneKeypoints(ObjectModelAdapter):
    """The zoo's keypoint model (hibug_core.models.zoo.scene_keypoints): loaded from its checkpoint, fine-tuned with
    its own schedule on people with keypoints, run to find people and their keypoints."""

    def __init__(self, spec: str, checkpoint: Path):
        from hibug_core.models.zoo.scene_keypoints import load_keypoint_model

        self.spec = spec
        self.network, self.classes, self.keypoints, self.config = load_keypoint_model(checkpoint)

    needs = ("keypoints", "keypoints")
    draws = ("keypoints", "box")

    def _train(self, data: TrainingSet, new: TrainingSet, config, progress: ProgressCallback, lam: float):
        from hibug_core.models.zoo.scene_keypoints import train_keypoint_model

        return train_keypoint_model(data.images, data.people(), self.classes, self.keypoints, config, progress,
                                    start_from=self.network, new=(new.images, new.people()), lam=lam)

    def save(self, network, path: Path, **extra) -> Path:
        from hibug_core.models.zoo.scene_keypoints import save_keypoint_model

        save_keypoint_model(path, network, self.classes, self.keypoints, self.config)
        return path

    def predict(self, images: list, *, network=None, progress: ProgressCallback = no_progress) -> list:
        from hibug_core.models.zoo.scene_keypoints import detect_people

        return detect_people(network or self.network, images, self.classes, progress=progress)


class SceneMasks(ObjectModelAdapter):
    """The zoo's mask model (hibug_core.models.zoo.scene_masks): loaded from its checkpoint, fine-tuned with its own
    schedule on objects with masks, run to find objects and their masks."""

    def __init__(self, spec: str, checkpoint: Path):
        from hibug_core.models.zoo.scene_masks import load_mask_model

        self.spec = spec
        self.network, self.classes, self.config = load_mask_model(checkpoint)

    needs = ("masks", "masks (COCO's 'segmentation')")
    draws = ("mask", "box")

    def _train(self, data: TrainingSet, new: TrainingSet, config, progress: ProgressCallback, lam: float):
        from hibug_core.models.zoo.scene_masks import train_mask_model

        return train_mask_model(data.images, data.objects, data.masks, self.classes, config, progress,
                                start_from=self.network, new=(new.images, new.objects, new.masks or []), lam=lam)

    def save(self, network, path: Path, **extra) -> Path:
        from hibug_core.models.zoo.scene_masks import save_mask_model

        save_mask_model(path, network, self.classes, self.config)
        return path

    def predict(self, images: list, *, network=None, progress: ProgressCallback = no_progress) -> list:
        from hibug_core.models.zoo.scene_masks import segment

        return segment(network or self.network, images, self.classes, progress=progress)
