"""Every family of the model registry keeps one contract (hibug_core.models.adapter.ModelUnderTest): predict and
features per image, a checkpoint saved by the adapter loads again through the registry and predicts the same, and
fine-tuning returns a network of the same architecture. Tiny models built from config, randomly initialised."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw

from hibug_core.models.adapter import ModelUnderTest
from hibug_core.models.finetune import TuneConfig
from hibug_core.models.object_models import TrainingSet
from hibug_core.models.registry import load_model

SHAPES = ["circle", "rectangle", "triangle"]


def _scene(k: int, size: int) -> Image.Image:
    image = Image.new("RGB", (size, size), (240, 240, 230))
    ImageDraw.Draw(image).rectangle((10 + k, 12, 40 + k, 50), fill=(40 * k % 255, 80, 200))
    return image


def _classifier(tmp_path):
    import torch

    from hibug_core.models.zoo.shape_cnn import TrainConfig, build_network, save_checkpoint

    torch.manual_seed(0)
    save_checkpoint(tmp_path / "cnn.pt", build_network(3), SHAPES, TrainConfig(), "untrained")
    images = [_scene(k, 64) for k in range(6)]
    for k, image in enumerate(images):
        image.save(tmp_path / f"{k}.png")
    paths = [str(tmp_path / f"{k}.png") for k in range(6)]
    data, new = (paths[:4], np.array([0, 1, 2, 0])), (paths[4:], np.array([1, 2]))
    return "shape-cnn", "cnn.pt", images, data, new, {"folder": tmp_path / "tuning"}


def _detector(tmp_path):
    from hibug_core.models.zoo.scene_fcos import DetectorConfig, build_detector, save_detector

    config = DetectorConfig(image_size=64, width=8, pyramid_channels=32, score_threshold=0.0)
    save_detector(tmp_path / "fcos.pt", build_detector(SHAPES, config), SHAPES, config, "untrained")
    images = [_scene(k, 64) for k in range(4)]
    boxes = [(np.array([[10.0 + k, 12, 30, 38]]), ["rectangle"]) for k in range(4)]
    return "scene-fcos", "fcos.pt", images, TrainingSet(images[:3], boxes[:3]), TrainingSet(images[3:], boxes[3:]), {}


def _keypoints(tmp_path):
    from hibug_core.models.zoo.scene_keypoints import KeypointModelConfig, build_keypoint_model, save_keypoint_model

    config = KeypointModelConfig(image_size=64, width=8, pyramid_channels=16, head_channels=16, batch_size=2)
    save_keypoint_model(tmp_path / "people.pt", build_keypoint_model(["person"], 4, config), ["person"], 4, config)
    images = [_scene(k, 64) for k in range(4)]
    people = [(np.array([[10.0 + k, 12, 30, 38]]), ["person"]) for k in range(4)]
    points = [np.array([[[15.0 + k, 15, 2], [35 + k, 15, 2], [15 + k, 45, 2], [35 + k, 45, 2]]]) for k in range(4)]
    return ("scene-keypoints", "people.pt", images, TrainingSet(images[:3], people[:3], points[:3]),
            TrainingSet(images[3:], people[3:], points[3:]), {})


def _masks(tmp_path):
    from hibug_core.models.zoo.scene_masks import MaskModelConfig, build_mask_model, save_mask_model

    config = MaskModelConfig(image_size=64, width=8, pyramid_channels=16, head_channels=16, batch_size=2,
                             score_threshold=0.0)
    save_mask_model(tmp_path / "masks.pt", build_mask_model(SHAPES, config), SHAPES, config)
    images = [_scene(k, 64) for k in range(4)]
    boxes = [(np.array([[10.0 + k, 12, 31, 39]]), ["rectangle"]) for k in range(4)]
    masks = []
    for k in range(4):
        mask = np.zeros((1, 64, 64), bool)
        mask[0, 12:51, 10 + k:41 + k] = True
        masks.append(mask)
    return ("scene-masks", "masks.pt", images, TrainingSet(images[:3], boxes[:3], masks=masks[:3]),
            TrainingSet(images[3:], boxes[3:], masks=masks[3:]), {})


@pytest.mark.parametrize("family", [pytest.param(_classifier, id="shape-cnn"), pytest.param(_detector, id="scene-fcos"),
                                    pytest.param(_keypoints, id="scene-keypoints", marks=pytest.mark.slow),
                                    pytest.param(_masks, id="scene-masks", marks=pytest.mark.slow)])
def test_every_model_family_keeps_one_contract(family, tmp_path):
    name, checkpoint, images, data, new, options = family(tmp_path)
    adapter = load_model(f"{name}:{tmp_path / checkpoint}")
    assert isinstance(adapter, ModelUnderTest) and adapter.spec == f"{name}:{tmp_path / checkpoint}"
    # Predict and features: one of each per image.
    predicted = adapter.predict(images)
    features = adapter.features(images)
    assert len(predicted) == len(images) and features.shape[0] == len(images) and features.shape[1] > 0
    assert np.isfinite(features).all()
    # Saved by the adapter, loaded again through the registry: the same predictions.
    saved = adapter.save(adapter.network, tmp_path / "saved" / checkpoint)
    again = load_model(f"{name}:{saved}")
    assert str(again.predict(images)) == str(predicted)
    # Fine-tuning gives a network of the same architecture, which the adapter runs and saves.
    tuned = adapter.fine_tune(data, new, lam=1.0, tune=TuneConfig(epochs=1, batch_size=2, learning_rate=1e-3),
                              **options)
    assert type(tuned) is type(adapter.network) and tuned is not adapter.network
    assert len(adapter.predict(images, network=tuned)) == len(images)
    assert adapter.features(images, network=tuned).shape == features.shape
    assert load_model(f"{name}:{adapter.save(tuned, tmp_path / 'tuned' / checkpoint)}").classes == adapter.classes
