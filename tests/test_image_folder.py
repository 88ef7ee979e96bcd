"""The image-folder importer maps root/<split>/<label>/*.png plus a predictions CSV onto the data contract."""
from __future__ import annotations

import pytest
from PIL import Image

from hibug_core.errors import ManifestError
from hibug_core.ingest.image_folder import load_image_folder


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "data"
    for split, label, name in (("train", "cat", "1"), ("val", "cat", "2"), ("val", "dog", "3"), ("pool", None, "4")):
        folder = root / split / label if label else root / split
        folder.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (16, 16), (10, 20, 30)).save(folder / f"{name}.jpg")
    return root


def test_tree_with_predictions(tree, tmp_path):
    predictions = tmp_path / "predictions.csv"
    predictions.write_text("image,prediction,confidence\ntrain/cat/1.jpg,cat,0.9\nval/cat/2.jpg,dog,0.6\n"
                           "val/dog/3.jpg,dog,0.8\npool/4.jpg,cat,0.5\n")
    manifest = load_image_folder(tree, predictions)
    samples = manifest.samples.set_index("split")
    assert sorted(manifest.samples["split"]) == ["pool", "train", "val", "val"]
    assert samples.loc["pool", "label"] is None
    score = dict(zip(manifest.samples["image_path"].map(lambda p: p.rsplit("/", 1)[1]), manifest.models["model"].score))
    assert {k: v for k, v in score.items() if k != "4.jpg"} == {"1.jpg": 1.0, "2.jpg": 0.0, "3.jpg": 1.0}


def test_missing_and_unknown_predictions(tree, tmp_path):
    predictions = tmp_path / "predictions.csv"
    predictions.write_text("image,prediction\ntrain/cat/1.jpg,cat\nval/cat/9.jpg,dog\n")
    with pytest.raises(ManifestError) as caught:
        load_image_folder(tree, predictions)
    assert caught.value.messages == [f"row 2, column 'image': 'val/cat/9.jpg' is not an image under {tree}"]
    predictions.write_text("image,prediction\ntrain/cat/1.jpg,cat\n")
    with pytest.raises(ManifestError) as caught:
        load_image_folder(tree, predictions)
    assert caught.value.messages[0] == "column 'image': no predictions for 'pool/4.jpg'"


def test_unknown_split_folder(tree, tmp_path):
    (tree / "validation" / "cat").mkdir(parents=True)
    Image.new("RGB", (8, 8)).save(tree / "validation" / "cat" / "5.jpg")
    predictions = tmp_path / "predictions.csv"
    predictions.write_text("image,prediction\ntrain/cat/1.jpg,cat\nval/cat/2.jpg,dog\nval/dog/3.jpg,dog\n"
                           "pool/4.jpg,cat\nvalidation/cat/5.jpg,cat\n")
    with pytest.raises(ManifestError, match=r"unknown split 'validation'; .* \(did you mean 'val'\?\)"):
        load_image_folder(tree, predictions)
