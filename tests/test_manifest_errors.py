"""Every bad manifest gets an exact message naming its row and column, and changes nothing."""
from __future__ import annotations

import pandas as pd
import pytest

from hibug_core.config import IngestConfig
from hibug_core.errors import ManifestError
from hibug_core.store.project import Project
from hibug_core.tasks import load_manifest

HEADER = "image,label,prediction,split\n"


def messages(path) -> list[str]:
    with pytest.raises(ManifestError) as caught:
        load_manifest(path)
    assert "nothing was imported" in str(caught.value)
    return caught.value.messages


def test_good_manifest_loads_every_field(image_dir, write_csv):
    path = write_csv("image,label,prediction,split,prob:cat,prob:dog,attr:color,notes\n"
                     "images/a.png,cat,cat,train,0.9,0.1,red,x\n"
                     "images/b.png,dog,cat,val,0.7,0.3,blue,\n"
                     "images/c.png,,dog,pool,0.2,0.8,,\n")
    manifest = load_manifest(path)
    assert manifest.n_rows == 3
    assert manifest.samples["split"].tolist() == ["train", "val", "pool"]
    assert manifest.samples["label"].tolist() == ["cat", "dog", None]
    outputs = manifest.models["model"]
    assert outputs.classes == ["cat", "dog"]
    assert outputs.score.tolist()[:2] == [1.0, 0.0] and pd.isna(outputs.score[2])
    assert outputs.confidence.round(6).tolist() == [0.9, 0.7, 0.8]
    assert manifest.known_tags == {"color": ["red", "blue", None]}
    assert manifest.ignored_columns == ["notes"]
    assert manifest.samples["width"].tolist() == [32, 32, 32]


def test_missing_file(image_dir, write_csv):
    path = write_csv(HEADER + "images/a.png,cat,cat,val\nimages/zz.png,cat,cat,val\n")
    expected = f"row 2, column 'image': file not found: images/zz.png (looked for {image_dir / 'zz.png'})"
    assert messages(path) == [expected]


def test_corrupt_and_unreadable_images(image_dir, write_csv):
    path = write_csv(HEADER + "images/truncated.png,cat,cat,val\nimages/notes.png,cat,cat,val\n")
    assert messages(path) == [
        "row 1, column 'image': corrupt or truncated image data: images/truncated.png",
        "row 2, column 'image': not an image, or a format Pillow cannot read: images/notes.png",
    ]


def test_a_png_damaged_inside_its_pixel_data_is_refused(image_dir, write_csv):
    """Bytes changed in the middle of a PNG's compressed pixels: its chunk checksum no longer matches (a PNG is
    checked by its checksums through to its end, not decoded)."""
    import io

    import numpy as np
    from PIL import Image

    noise = Image.fromarray((np.random.default_rng(0).random((48, 48, 3)) * 255).astype("uint8"))
    buffer = io.BytesIO()
    noise.save(buffer, "PNG")
    data = bytearray(buffer.getvalue())
    at = data.index(b"IDAT") + 40
    data[at:at + 200] = bytes(200)
    (image_dir / "damaged.png").write_bytes(bytes(data))
    path = write_csv(HEADER + "images/damaged.png,cat,cat,val\nimages/a.png,cat,cat,val\n")
    assert messages(path) == ["row 1, column 'image': corrupt or truncated image data: images/damaged.png"]


def test_unknown_split(image_dir, write_csv):
    path = write_csv(HEADER + "images/a.png,cat,cat,validation\nimages/b.png,cat,cat,holdout\n")
    assert messages(path) == [
        "row 1, column 'split': unknown split 'validation'; use one of train, val, test, pool (did you mean 'val'?)",
        "row 2, column 'split': unknown split 'holdout'; use one of train, val, test, pool",
    ]


def test_label_prediction_type_mismatch(image_dir, write_csv):
    path = write_csv("image,label,prediction,pred:other\n"
                     "images/a.png,cat,cat,cat\nimages/b.png,dog,1,dog\n")
    assert messages(path) == ["row 2, column 'prediction': '1' is a number but the labels are class names "
                              "(e.g. 'cat'); use the same class names as 'label'"]
    path = write_csv("image,label,prediction\nimages/a.png,0,0\nimages/b.png,1,dog\n", name="numeric.csv")
    assert messages(path) == ["row 2, column 'prediction': 'dog' is text but the labels are numbers (e.g. 0); "
                              "use the same class ids as 'label'"]


def test_probabilities_must_sum_to_one(image_dir, write_csv):
    path = write_csv("image,label,prediction,prob:cat,prob:dog\n"
                     "images/a.png,cat,cat,0.9,0.1\nimages/b.png,dog,dog,0.5,0.3\nimages/c.png,dog,dog,1.2,x\n")
    assert messages(path) == [
        "row 2, column 'prob:*': probabilities sum to 0.8, not 1 (tolerance 0.01); give every class's probability",
        "row 3, column 'prob:cat': 1.2 is outside [0, 1]",
        "row 3, column 'prob:dog': 'x' is not a number",
    ]


def test_duplicate_image_rows(image_dir, write_csv):
    path = write_csv(HEADER + "images/a.png,cat,cat,val\nimages/b.png,cat,cat,val\n./images/a.png,dog,cat,val\n")
    assert messages(path) == ["row 3, column 'image': duplicate image './images/a.png', already in row 1 "
                              "(add an 'id' column if one image holds several samples)"]


def test_repeated_images_are_fine_with_an_id_column(image_dir, write_csv):
    path = write_csv("id,image,label,prediction\n1,images/a.png,cat,cat\n2,images/a.png,dog,cat\n")
    manifest = load_manifest(path)
    assert manifest.samples["sample_key"].tolist() == ["1", "2"]
    path = write_csv("id,image,label,prediction\n1,images/a.png,cat,cat\n1,images/b.png,dog,cat\n", name="dup.csv")
    assert messages(path) == ["row 2, column 'id': duplicate id '1', already in row 1"]


def test_non_utf8_text(image_dir, write_csv):
    text = (HEADER + "images/a.png,cat,cat,val\nimages/b.png,caf\xe9,cat,val\n").encode("latin-1")
    path = write_csv(text, encoding=None)
    assert messages(path) == ["row 2, column 'label': text is not valid UTF-8 (byte 0xe9); save the file as UTF-8"]


def test_structural_problems(image_dir, write_csv):
    assert messages(write_csv("image,prediction\nimages/a.png,cat\n")) == [
        "column 'label': required column is missing (a manifest needs 'image' and 'label')"]
    unpredicted = write_csv("image,label\nimages/a.png,cat\n", name="nopred.csv")  # `hibug predict` comes next
    assert load_manifest(unpredicted).models == {}
    with pytest.raises(ManifestError, match="no model output: add a 'prediction' column or 'pred:<model>' columns"):
        load_manifest(unpredicted, config=IngestConfig(require_model=True))
    assert messages(write_csv("image,label,prediction,split\nimages/a.png,cat,cat,val,extra\n", name="f.csv")) == [
        "row 1: expected 4 fields, found 5; check quoting and commas"]


def test_empty_cells_and_scores(image_dir, write_csv):
    path = write_csv("image,label,prediction,score,split\nimages/a.png,,cat,0.5,val\nimages/b.png,cat,,1.5,val\n"
                     "images/c.png,,dog,,pool\n")
    assert messages(path) == [
        "row 1, column 'label': empty label; only rows of split 'pool' may be unlabelled",
        "row 2, column 'prediction': empty prediction",
        "row 2, column 'score': 1.5 is outside [0, 1]",
    ]


def test_parquet_manifest_with_several_models(image_dir, tmp_path):
    frame = pd.DataFrame({"image": ["images/a.png", "images/b.png"], "label": [0, 1], "pred:cnn": [0, 0],
                          "pred:vit": [0, 1], "score:vit": [1.0, 0.75], "split": ["val", "test"]})
    path = tmp_path / "m.parquet"
    frame.to_parquet(path)
    manifest = load_manifest(path)
    assert list(manifest.models) == ["cnn", "vit"]
    assert manifest.models["cnn"].score.tolist() == [1.0, 0.0]
    assert manifest.models["vit"].score.tolist() == [1.0, 0.75]
    assert manifest.samples["label"].tolist() == ["0", "1"]


def test_failed_import_keeps_previous_state(image_dir, write_csv, tmp_path):
    good = load_manifest(write_csv(HEADER + "images/a.png,cat,cat,val\nimages/b.png,dog,cat,val\n"))
    project = Project.create_from_manifest(tmp_path / "project", good)
    project.set_meta("note", "kept", author="ana")
    before_samples = project.samples("model")
    before_log = project.audit_log()
    bad = write_csv(HEADER + "images/c.png,cat,cat,val\nimages/zz.png,dog,cat,val\n", name="bad.csv")
    with pytest.raises(ManifestError):
        project.import_manifest(load_manifest(bad))
    # a clash with rows already stored is refused inside the transaction, after other rows were inserted
    clash = load_manifest(write_csv(HEADER + "images/c.png,cat,cat,val\nimages/a.png,dog,cat,val\n", name="c.csv"))
    with pytest.raises(ManifestError, match=r"row 2, column 'image': '.*a\.png' is already in the project"):
        project.import_manifest(clash)
    reopened = Project.open(tmp_path / "project")
    pd.testing.assert_frame_equal(reopened.samples("model"), before_samples)
    pd.testing.assert_frame_equal(reopened.audit_log(), before_log)
    assert reopened.meta()["note"] == "kept"
    assert len(reopened.imports()) == 1


def test_failed_create_leaves_no_folder(image_dir, write_csv, tmp_path):
    good = load_manifest(write_csv(HEADER + "images/a.png,cat,cat,val\nimages/b.png,dog,cat,val\n"))
    target = tmp_path / "project"

    class Boom(RuntimeError):
        pass

    original = Project.import_manifest

    def failing(self, manifest, **kwargs):
        original(self, manifest, **kwargs)
        raise Boom("disk full")

    Project.import_manifest = failing
    try:
        with pytest.raises(Boom):
            Project.create_from_manifest(target, good)
    finally:
        Project.import_manifest = original
    assert not target.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_rows_with_the_wrong_number_of_fields_are_found_the_same_without_the_csv_module():
    import numpy as np

    from hibug_core.ingest.table import _csv_field_count_issues, _unquoted_field_count_issues

    rng = np.random.default_rng(0)
    for _ in range(50):
        lines = ["a,b,c,d"] + [",".join(["x"] * int(rng.choice([3, 4, 4, 4, 5]))) if rng.random() > 0.1 else ""
                               for _ in range(int(rng.integers(1, 40)))]
        text = "\n".join(lines) + ("\n" if rng.random() < 0.5 else "")
        fast = [(i.row, i.message) for i in _unquoted_field_count_issues(text.encode(), ",", 20)]
        assert fast == [(i.row, i.message) for i in _csv_field_count_issues(text, ",", 20)]


@pytest.mark.parametrize("ending", ["\n", "\r\n"])
def test_white_space_around_cells_is_removed_and_kept_inside(image_dir, write_csv, ending):
    rows = ["image,label,prediction,split,attr:kind", "images/a.png, cat ,cat,\ttrain,\u00a0big dog\u00a0",
            "images/b.png,dog,dog ,val,small dog"]
    manifest = load_manifest(write_csv(ending.join(rows) + ending))
    assert manifest.samples["label"].tolist() == ["cat", "dog"]
    assert manifest.samples["split"].tolist() == ["train", "val"]
    assert manifest.models["model"].prediction == ["cat", "dog"]
    assert manifest.known_tags == {"kind": ["big dog", "small dog"]}


def test_a_mistyped_column_is_named_with_the_contracts_name_it_looks_like(image_dir, write_csv, tmp_path):
    from hibug_core.ingest.manifest import ignored_note
    from hibug_core.tasks.object_manifest import validate_object_manifest

    path = write_csv("img,lable,prediction\nimages/a.png,cat,cat\n")
    assert messages(path) == [
        "column 'image': required column is missing (a manifest needs 'image' and 'label'); the file has 'img': "
        "rename it 'image'",
        "column 'label': required column is missing (a manifest needs 'image' and 'label'); the file has 'lable': "
        "rename it 'label'"]
    # a column far from every name gets no guess
    assert messages(write_csv("picture,label,prediction\nimages/a.png,cat,cat\n")) == [
        "column 'image': required column is missing (a manifest needs 'image' and 'label')"]
    with pytest.raises(ManifestError) as caught:
        validate_object_manifest(pd.DataFrame({"imge": ["a.png"], "box": ["1 1 2 2"], "labl": ["cat"]}),
                                 source="o.csv", base_dir=tmp_path, task="detection")
    assert caught.value.messages == ["column 'image': required column is missing; the file has 'imge': rename it "
                                     "'image'", "column 'label': required with 'box': the class of each object; the "
                                     "file has 'labl': rename it 'label'"]
    # a column the import leaves aside is said with the name it looks mistyped from
    assert ignored_note(["predicton", "atr:color", "notes"]) == (
        "ignored columns (not in the data contract): predicton (did you mean 'prediction'?), atr:color (did you mean "
        "'attr:color'?), notes")
