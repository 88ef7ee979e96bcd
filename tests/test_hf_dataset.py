"""A Hugging Face `datasets` dataset as an import source: images written once, class ids as names, splits mapped,
every problem named and nothing imported on failure."""
from __future__ import annotations

import pytest
from PIL import Image

from hibug_core.errors import ManifestError
from hibug_core.ingest.hf_dataset import load_hf_dataset
from hibug_core.store.project import Project

COLOURS = {"red": (220, 30, 30), "green": (30, 200, 40), "blue": (30, 40, 220)}


def _colour_dataset(folder, *, broken_row: int | None = None):
    """train (6 rows) and validation (3 rows) of plain colour images, labels as a ClassLabel; saved to disk."""
    import datasets

    features = datasets.Features({"image": datasets.Image(), "label": datasets.ClassLabel(names=list(COLOURS)),
                                  "note": datasets.Value("string")})

    def part(n):
        images = [Image.new("RGB", (20 + i, 16), list(COLOURS.values())[i % 3]) for i in range(n)]
        return datasets.Dataset.from_dict({"image": images, "label": [i % 3 for i in range(n)],
                                           "note": [f"n{i}" for i in range(n)]}, features=features)

    splits = datasets.DatasetDict({"train": part(6), "validation": part(3)})
    if broken_row is not None:  # bytes that are no image
        raw = splits["train"].cast_column("image", datasets.Image(decode=False)).to_dict()
        raw["image"][broken_row] = {"bytes": b"\x89PNG not really", "path": None}
        splits["train"] = datasets.Dataset.from_dict(raw, features=datasets.Features(
            {**features, "image": datasets.Image(decode=False)}))
    splits.save_to_disk(str(folder))
    return folder


def test_a_saved_dataset_becomes_a_project_with_names_and_splits(tmp_path):
    source = _colour_dataset(tmp_path / "colours")
    manifest = load_hf_dataset(str(source), tmp_path / "images")
    assert manifest.n_rows == 9 and manifest.models == {}
    with Project.create_from_manifest(tmp_path / "project", manifest) as project:
        samples = project.samples()
        assert samples["split"].value_counts().to_dict() == {"train": 6, "val": 3}
        assert samples["label"].tolist() == ["red", "green", "blue"] * 3
        assert (samples["width"].tolist(), samples["height"].tolist()) == ([20, 21, 22, 23, 24, 25, 20, 21, 22],
                                                                           [16] * 9)
        assert samples["image_path"].str.startswith(str(tmp_path / "images" / "train")).sum() == 6
        with Image.open(samples["image_path"].iat[2]) as image:
            assert image.getpixel((0, 0)) == COLOURS["blue"]
    again = load_hf_dataset(str(source), tmp_path / "images")  # the same files, not written twice
    assert again.samples["content_hash"].tolist() == manifest.samples["content_hash"].tolist()


def test_columns_splits_and_broken_images_are_named(tmp_path):
    source = _colour_dataset(tmp_path / "colours")
    with pytest.raises(ManifestError) as raised:
        load_hf_dataset(str(source), tmp_path / "images", label_column="colour")
    assert raised.value.messages == [
        "column 'colour': no such column in split 'train'; the dataset has image, label, note",
        "column 'colour': no such column in split 'validation'; the dataset has image, label, note"]
    broken = _colour_dataset(tmp_path / "broken", broken_row=4)
    with pytest.raises(ManifestError) as raised:
        load_hf_dataset(str(broken), tmp_path / "broken-images")
    assert len(raised.value.messages) == 1 and raised.value.messages[0].startswith("row 5, column 'image': ")
    with pytest.raises(ManifestError, match="cannot open the dataset .*save_to_disk"):
        load_hf_dataset(str(tmp_path / "nothing-here"), tmp_path / "x")


def test_hibug_new_imports_a_dataset_from_the_command_line(tmp_path, capsys):
    from hibug_core.cli import main

    source = _colour_dataset(tmp_path / "colours")
    assert main(["new", str(tmp_path / "project"), "--hf-dataset", str(source)]) == 0
    out = capsys.readouterr().out
    assert "created" in out and "9 samples" in out and "none yet (run yours: hibug predict" in out
    assert len(list((tmp_path / "project-images" / "val").iterdir())) == 3
