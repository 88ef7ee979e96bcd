"""Every value entering a project takes one form: the named cases, and random Unicode forms, invisible characters and
missing-value spellings drawn through every entry point (CSV, Parquet, COCO, datasets, dashboard edits, LLM answers)."""
from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from hibug_core.errors import ManifestError
from hibug_core.tasks import load_manifest
from hibug_core.values import MISSING_SPELLINGS, ValueRefused, normalise_column, normalise_name, normalise_value

CLASSES = ("café", "Ångström", "naïve bird", "crème brûlée", "크다")  # each has a decomposed (NFD) form
INVISIBLE = ("\u200b", "\u200c", "\u2060", "\ufeff", "\u00ad", "\u200e")  # zero-width, word joiner, BOM, soft hyphen
SPACES = ("", " ", "  ", "\u00a0", "\u3000", "\t", "\u2009")
MISSING = ("NaN", "nan", "None", "null", "N/A", "NA", "n/a", "NULL", "<NA>", "#N/A", " none ")
TAG_MISSING = tuple(m for m in MISSING if m.strip().casefold() != "none")  # "none" is a tag (occlusion: none)
HYPOTHESIS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                                HealthCheck.too_slow])


@st.composite
def written(draw, name: str) -> str:
    """`name` as a file or a person might write it: either Unicode form, an invisible character inside, and spaces
    of any kind around it."""
    text = unicodedata.normalize(draw(st.sampled_from(["NFC", "NFD"])), name)
    if draw(st.booleans()):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(INVISIBLE)) + text[at:]
    return draw(st.sampled_from(SPACES)) + text + draw(st.sampled_from(SPACES))


def nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("values") / "images"
    folder.mkdir()
    for i in range(8):
        Image.new("RGB", (16, 12), (30 * i, 90, 200 - 20 * i)).save(folder / f"{i}.png")
    return folder


# ----- the four cases of the issue, each refused or normalised with a named message ------------------------------
def test_missing_value_spellings_are_missing_and_named_in_a_labelled_split(images):
    rows = ["image,label,prediction,split"] + [f"images/{i}.png,{label},cat,val"
                                               for i, label in enumerate(["NaN", "nan", "None", "null", "N/A"])]
    rows.append("images/5.png,cat,NA,val")
    path = images.parent / "missing.csv"
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(ManifestError) as raised:
        load_manifest(path)
    assert raised.value.messages == [
        *[f"row {i + 1}, column 'label': empty label; only rows of split 'pool' may be unlabelled ('{spelled}' is "
          "read as a missing value)" for i, spelled in enumerate(["NaN", "nan", "None", "null", "N/A"])],
        "row 6, column 'prediction': empty prediction ('NA' is read as a missing value)"]


def test_missing_value_spellings_are_unlabelled_in_the_pool(images):
    rows = ["image,label,prediction,split", "images/0.png,cat,cat,val", "images/1.png,NaN,cat,pool",
            "images/2.png,None,dog,pool", "images/3.png,dog,dog,val"]
    path = images.parent / "pool.csv"
    path.write_text("\n".join(rows) + "\n")
    manifest = load_manifest(path)
    assert manifest.samples["label"].tolist() == ["cat", None, None, "dog"]
    assert sorted(set(manifest.samples["label"].dropna())) == ["cat", "dog"]  # no class named "NaN" or "None"
    assert manifest.notes == [
        "column 'label': 2 values spelling a missing value (NaN, None) read as missing (row 2 ...)"]


def test_a_label_and_a_prediction_that_differ_only_in_form_are_one_class(images):
    rows = ["image,label,prediction", "images/0.png,e\u0301te\u0301,\u00e9t\u00e9",
            "images/1.png,ca\u200bt,cat", "images/2.png,cat,cat"]
    path = images.parent / "forms.csv"
    path.write_text("\n".join(rows) + "\n")
    manifest = load_manifest(path)
    assert manifest.samples["label"].tolist() == ["\u00e9t\u00e9", "cat", "cat"]
    assert manifest.models["model"].score.tolist() == [1.0, 1.0, 1.0]
    assert manifest.notes == [
        "column 'label': invisible characters removed (U+200B ZERO WIDTH SPACE) in 1 value (row 2)"]


@pytest.mark.parametrize("labels, named", [
    ([["a", "b"], ["c"], ["d"]], "['a', 'b'] is a ndarray, not one value; give one text per cell"),
    ([{"a": 1}, {"a": 2}, {"a": 3}], "{'a': 1} is a dict, not one value; give one text per cell"),
    (pd.to_datetime(["2020-01-01", "2020-01-02", "2020-01-03"]), "Timestamp('2020-01-01 00:00:00') is a date or time, "
                                                                 "not a class; store it as text if it is meant as one"),
    ([b"\x00\x01binary", b"cat", b"dog"], "b'\\x00\\x01binary' is binary data (8 bytes), not text; store it as text"),
    ([2.5, 1.0, 3.0], "2.5 is a number that is not whole: a class or name is text or a whole number"),
])
def test_a_parquet_cell_that_is_not_one_text_is_refused_by_row_column_and_type(images, labels, named):
    frame = pd.DataFrame({"image": [f"images/{i}.png" for i in range(3)], "label": labels,
                          "prediction": ["cat", "cat", "dog"]})
    path = images.parent / "typed.parquet"
    frame.to_parquet(path)
    with pytest.raises(ManifestError) as raised:
        load_manifest(path)
    assert raised.value.messages[0] == f"row 1, column 'label': {named}"


def test_whole_numbers_are_classes_written_alike_for_labels_and_predictions(images):
    frame = pd.DataFrame({"image": [f"images/{i}.png" for i in range(3)], "label": [1.0, 2.0, 3.0],
                          "prediction": pd.array([1, 2, 4], dtype="Int64")})
    path = images.parent / "numbers.parquet"
    frame.to_parquet(path)
    manifest = load_manifest(path)
    assert manifest.samples["label"].tolist() == ["1", "2", "3"]
    assert manifest.models["model"].prediction == ["1", "2", "4"]
    assert manifest.models["model"].score.tolist() == [1.0, 1.0, 0.0]


@pytest.mark.parametrize("text, why", [
    ("ca\u202et", "U+202E RIGHT-TO-LEFT OVERRIDE"),
    ("ca\x07t", "the control character U+0007"),
    ("two\nlines", "a line break or tab (U+000A)"),
])
def test_characters_that_hide_what_a_value_says_are_refused_by_code_point(text, why):
    with pytest.raises(ValueRefused, match=re.escape(why)):
        normalise_value(text)


def test_the_plain_check_agrees_with_the_full_one_on_every_kind_of_cell():
    cells = ["cat", " cat", "cat ", "a  b", "a b", "", "NaN", "nULL", "café", "x\ty", "\u00a0x", "ok\u200b", "n/a"]
    fast = normalise_column(pd.Series(cells, dtype="str"))
    slow = [normalise_value(c) if c not in ("x\ty",) else None for c in cells]
    assert [None if v == "" else v for v in fast.values] == slow  # "" is how a table writes a missing cell
    assert fast.refused == [(9, "holds a line break or tab (U+0009); a value is one line")]
    assert normalise_column(pd.Series(["cat", "dog"], dtype="str")).changed_any is False


# ----- random forms through every entry point ----------------------------------------------------------------------
def _manifest_rows(data, missing_rows: int):
    labels = [data.draw(st.sampled_from(CLASSES)) for _ in range(6)]
    rows = [{"image": f"images/{i}.png", "label": data.draw(written(label)),
             "prediction": data.draw(written(label if i % 2 == 0 else CLASSES[0])), "split": "val"}
            for i, label in enumerate(labels)]
    for i in range(missing_rows):
        rows.append({"image": f"images/{6 + i}.png", "label": data.draw(st.sampled_from(MISSING)),
                     "prediction": data.draw(written(CLASSES[1])), "split": "pool"})
    return labels, rows


def _one_form_per_class(manifest, labels):
    stored = manifest.samples["label"].tolist()
    assert stored[:6] == labels and all(v is None for v in stored[6:])
    assert set(manifest.models["model"].prediction) <= set(CLASSES)
    scores = manifest.models["model"].score[:6]
    expected = [1.0 if i % 2 == 0 or label == CLASSES[0] else 0.0 for i, label in enumerate(labels)]
    assert scores.tolist() == expected


@HYPOTHESIS
@given(data=st.data())
def test_csv_and_parquet_manifests_store_one_form_per_class(images, data):
    labels, rows = _manifest_rows(data, missing_rows=2)
    frame = pd.DataFrame(rows)
    csv_path, parquet_path = images.parent / "drawn.csv", images.parent / "drawn.parquet"
    csv_path.write_text(frame.to_csv(index=False, lineterminator="\n"), encoding="utf-8")
    frame.to_parquet(parquet_path)
    for path in (csv_path, parquet_path):
        _one_form_per_class(load_manifest(path), labels)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                HealthCheck.too_slow])
@given(data=st.data())
def test_a_datasets_dataset_stores_one_form_per_class(images, tmp_path_factory, data):
    import datasets

    from hibug_core.ingest.hf_dataset import load_hf_dataset

    labels, rows = _manifest_rows(data, missing_rows=1)
    frame = pd.DataFrame(rows)
    folder = tmp_path_factory.mktemp("dataset")
    datasets.Dataset.from_dict({"image": [str(images.parent / r) for r in frame["image"]],
                                "label": frame["label"].tolist(), "split": frame["split"].tolist()}
                               ).save_to_disk(str(folder / "saved"))
    manifest = load_hf_dataset(str(folder / "saved"), folder / "images", split_column="split")
    stored = manifest.samples["label"].tolist()
    assert stored[:6] == labels and stored[6] is None


def test_a_datasets_label_that_is_a_list_is_refused_by_row(images, tmp_path):
    import datasets

    from hibug_core.ingest.hf_dataset import load_hf_dataset

    datasets.Dataset.from_dict({"image": [str(images / f"{i}.png") for i in range(2)], "label": [["a", "b"], ["c"]]}
                               ).save_to_disk(str(tmp_path / "saved"))
    with pytest.raises(ManifestError) as raised:
        load_hf_dataset(str(tmp_path / "saved"), tmp_path / "images")
    assert raised.value.messages[:2] == ["row 1, column 'label': ['a', 'b'] is a list, not one value; give one text "
                                         "per cell", "row 2, column 'label': ['c'] is a list, not one value; give "
                                         "one text per cell"]


@HYPOTHESIS
@given(data=st.data())
def test_coco_category_names_and_annotation_tags_take_one_form(images, data):
    from hibug_core.objects.coco import parse_ground_truth

    names = {i + 1: data.draw(written(name)) for i, name in enumerate(CLASSES[:3])}
    tag = data.draw(written("crème"))
    document = {"images": [{"id": 1, "file_name": "0.png", "width": 16, "height": 12}],
                "categories": [{"id": i, "name": name} for i, name in names.items()],
                "annotations": [{"id": i, "image_id": 1, "category_id": i, "bbox": [1, 1, 4, 4],
                                 "attributes": {data.draw(written("colour")): tag,
                                                "occluded": data.draw(st.sampled_from(TAG_MISSING)),
                                                "blur": "None"}}
                                for i in names]}
    truth = parse_ground_truth(document, str(images / "instances.json"))
    assert truth.categories == {i + 1: name for i, name in enumerate(CLASSES[:3])}
    # the missing tag left out; "None" is a tag
    assert truth.annotations["attributes"].tolist() == [{"colour": "crème", "blur": "None"}] * 3


def test_coco_categories_that_are_one_name_in_one_form_are_refused(images):
    from hibug_core.objects.coco import parse_ground_truth

    document = {"images": [{"id": 1, "file_name": "0.png", "width": 16, "height": 12}],
                "categories": [{"id": 1, "name": "caf\u00e9"}, {"id": 2, "name": "cafe\u0301 "}], "annotations": []}
    with pytest.raises(ManifestError, match="'café' is the name of another category too"):
        parse_ground_truth(document, str(images / "instances.json"))


@HYPOTHESIS
@given(data=st.data())
def test_names_typed_in_the_dashboard_take_one_form(data):
    from hibug_core.attributes import Attribute

    attribute = Attribute(name=data.draw(written("crème colour")),
                          tags=[data.draw(written(name)) for name in CLASSES[:3]])
    assert attribute.name == "crème colour" and attribute.tags == CLASSES[:3]
    assert normalise_name(data.draw(written("Ångström")), "a model") == "Ångström"
    from hibug_core.operations import Predict

    assert Predict(model="timm:resnet18", name=data.draw(written("Ångström"))).name == "Ångström"


def test_a_saved_view_name_is_stored_in_one_form(colour_project):
    from hibug_core.review.board import ReviewError
    from hibug_core.review.views import save_view

    save_view(colour_project, "cafe\u0301\u200b view", "Error_slices", {"slice": "x"})
    with pytest.raises(ReviewError, match="a view named 'café view' was saved by"):
        save_view(colour_project, " café  view", "Error_slices", {"slice": "y"})


def test_a_missing_spelling_cannot_name_a_tag():
    from hibug_core.attributes import Attribute

    with pytest.raises(ValueError, match=re.escape("the tag is empty or spells a missing value ('N/A')")):
        Attribute(name="occlusion", tags=["N/A", "heavy"])
    assert Attribute(name="occlusion", tags=[" none", "heavy"]).tags == ("none", "heavy")  # a word a tag can be


@HYPOTHESIS
@given(data=st.data())
def test_llm_answers_match_the_schemas_tags_in_any_form(data):
    from hibug_core.attributes import Attribute
    from hibug_core.tagging.mllm import validate_answer

    attribute = Attribute(name="flavour", tags=list(CLASSES[:3]))
    chosen = data.draw(st.sampled_from(CLASSES[:3]))
    assert validate_answer({data.draw(written("flavour")): data.draw(written(chosen))}, [attribute]) == \
        {"flavour": chosen}


def test_an_llm_answer_that_is_not_one_text_is_refused_with_why():
    from hibug_core.attributes import Attribute
    from hibug_core.tagging.mllm import validate_answer

    attribute = Attribute(name="flavour", tags=["sweet", "sour"])
    with pytest.raises(ValueError, match=r"\"flavour\": \['sweet'\] is a list, not one value"):
        validate_answer({"flavour": ["sweet"]}, [attribute])


@HYPOTHESIS
@given(data=st.data())
def test_tags_corrected_by_hand_and_tagger_runs_are_stored_in_one_form(colour_project, data):
    from hibug_core.store.tag_store import TagResult, correct_tags, corrections, load_run, save_run

    written_tag = data.draw(written("crème"))
    correct_tags(colour_project, data.draw(written("colour")), [1], written_tag)
    assert corrections(colour_project).iloc[-1][["attribute", "tag"]].tolist() == ["colour", "crème"]
    result = TagResult(np.array([1, 2]), {data.draw(written("flavour")): tuple(data.draw(written(c))
                                                                               for c in CLASSES[:2])},
                       np.zeros((2, 1), np.int16), np.ones((2, 1), np.float32), np.ones((2, 1), np.float32))
    run = save_run(colour_project, result, method="test")
    assert load_run(colour_project, run).attributes == {"flavour": CLASSES[:2]}


def test_every_missing_spelling_is_known():
    assert {s.strip().casefold() for s in MISSING} <= MISSING_SPELLINGS
    assert json.loads(json.dumps(sorted(MISSING_SPELLINGS)))  # plain text, for the docs' list


def test_an_integer_beyond_any_float_is_kept_as_its_digits_or_refused_as_a_coordinate_never_a_crash():
    from hibug_core.values import finite_number, finite_numbers

    huge = 10 ** 400  # JSON allows any length; a crafted file may hold one
    assert normalise_value([1, huge, 2.5], "numbers") == f"1 {huge} 2.5"
    assert normalise_value(huge, "number") == str(huge)
    assert not finite_number(huge) and not finite_numbers([1.0, huge]) and finite_numbers([1, 2.5])
    assert not finite_numbers([1.0, True]) and not finite_numbers([1e308, 1e308, float("inf")])
    assert finite_numbers([1e308, 1e308])  # finite each, though their sum is not
