"""Tagging: the schema, zero-shot maths, measured attributes, corrections, probes, quality, the encoder registry."""
from __future__ import annotations

import math

import numpy as np
import pytest

from hibug_core.attributes import Attribute, AttributeSchema
from hibug_core.attributes.measured import COLOUR_NAMES
from hibug_core.embeddings.base import Encoder
from hibug_core.embeddings.compute import embed_project, stored_embeddings
from hibug_core.embeddings.registry import load_encoder
from hibug_core.errors import ModelLoadError, ProjectError, TaggingError
from hibug_core.store import tag_store
from hibug_core.store.attribute_versions import latest_version, load_schema, save_schema, schema_history
from hibug_core.tagging.measured import PIXEL_MEASURES, colour_names, measure_pixels
from hibug_core.tagging.run import current_tags, project_tag_quality, tag_project, teach
from hibug_core.tagging.zero_shot import tag_classifier, text_embeddings, zero_shot_tags
from hibug_core.tasks import task_of

COLOR = Attribute(name="color", tags=("red", "green", "blue"), templates=("a {tag} {label}", "{tag} paint"))


class WordEncoder(Encoder):
    """Text vectors that are one-hot on colour words: zero-shot maths with values known by hand."""

    spec = key = "words"
    logit_scale = 10.0
    input_size = 8
    transform = None

    def __init__(self):
        self.calls: list[list[str]] = []

    def encode_images(self, batch):
        raise NotImplementedError

    def encode_texts(self, texts):
        self.calls.append(list(texts))
        basis = {"red": [1, 0, 0], "green": [0, 1, 0], "blue": [0, 0, 1]}
        return np.array([next((basis[w] for w in basis if w in t), [1, 1, 1]) for t in texts], dtype=np.float32)


# ----- schema ---------------------------------------------------------------------------------------------
def test_binary_attributes_are_named_is_and_prompt_both_ways():
    attribute = Attribute(name="is wearing glasses", kind="binary", tags=("yes", "no", "not visible"))
    assert attribute.prompts("person") == [
        ["a photo of a person that is wearing glasses", "a person that is wearing glasses"],
        ["a photo of a person that is not wearing glasses", "a person that is not wearing glasses"],
        ["a photo of a person where the wearing glasses is not visible", "a photo of a person without wearing glasses"],
    ]
    with pytest.raises(ValueError, match="must be named 'is ...'"):
        Attribute(name="glasses", kind="binary", tags=("yes", "no"))
    with pytest.raises(ValueError, match="takes the tags yes / no"):
        Attribute(name="is tall", kind="binary", tags=("yes", "maybe"))


def test_schema_rejects_duplicates_and_unknown_prompt_tags():
    with pytest.raises(ValueError, match="duplicate tags: red"):
        Attribute(name="color", tags=("red", "Red"))
    with pytest.raises(ValueError, match="duplicate attribute names: color"):
        AttributeSchema(attributes=(COLOR, COLOR))
    with pytest.raises(ValueError, match="not a tag of 'color'"):
        Attribute(name="color", tags=("red", "blue"), tag_prompts={"pink": ("a pink thing",)})
    assert COLOR.prompts("car")[0] == ["a red car", "red paint"]


def test_every_schema_edit_is_a_new_version(colour_project):
    first = latest_version(colour_project)
    edited = load_schema(colour_project).replace(COLOR.model_copy(update={"tags": ("red", "green", "blue", "pink")}))
    second = save_schema(colour_project, edited, author="ana", note="add pink")
    assert second == first + 1
    assert load_schema(colour_project)["color"].tags[-1] == "pink"
    assert load_schema(colour_project, first)["color"].tags == ("red", "green", "blue")
    history = schema_history(colour_project)
    assert history[["version", "author", "note"]].values.tolist()[0] == [second, "ana", "add pink"]
    with pytest.raises(ProjectError, match="no attribute schema version 99"):
        load_schema(colour_project, 99)


# ----- zero-shot maths ------------------------------------------------------------------------------------
def test_zero_shot_softmax_score_and_margin_are_exact():
    encoder = WordEncoder()
    embedding = np.array([[0.8, 0.6, 0.0], [0.0, 0.0, 1.0]], dtype=np.float32)
    result = zero_shot_tags(np.array([7, 9]), embedding, np.array(["car", None], dtype=object), [COLOR], encoder)
    total = math.exp(8) + math.exp(6) + 1
    assert result.tag_index[:, 0].tolist() == [0, 2]
    assert result.score[0, 0] == pytest.approx(math.exp(8) / total, rel=1e-6)
    assert result.margin[0, 0] == pytest.approx((math.exp(8) - math.exp(6)) / total, rel=1e-6)
    assert result.score[1, 0] == pytest.approx(math.exp(10) / (math.exp(10) + 2), rel=1e-6)
    prompts = {p for call in encoder.calls for p in call}
    assert {"a red car", "a red object", "blue paint"} <= prompts  # images without a label get the fallback noun


def test_prompt_ensembling_averages_normalised_prompt_vectors():
    attribute = Attribute(name="color", tags=("red", "green"), tag_prompts={"red": ("red", "green paint")})
    classifier = tag_classifier(attribute, "car", text_embeddings(WordEncoder()))
    assert classifier[0] == pytest.approx([math.sqrt(0.5), math.sqrt(0.5), 0.0])


def test_an_attribute_edit_re_encodes_only_its_new_prompts():
    encoder = WordEncoder()
    shape = Attribute(name="shape", tags=("round", "square"))
    zero_shot_tags(np.array([1]), np.ones((1, 3), np.float32), np.array(["car"], dtype=object), [COLOR, shape], encoder)
    encoder.calls.clear()
    edited = COLOR.model_copy(update={"tags": ("red", "green", "blue", "pink")})
    zero_shot_tags(np.array([1]), np.ones((1, 3), np.float32), np.array(["car"], dtype=object), [edited, shape],
                   encoder)
    assert encoder.calls == [["a pink car", "pink paint"]]


# ----- measured attributes --------------------------------------------------------------------------------
def test_measures_of_a_flat_grey_image_are_exact():
    values = dict(zip(PIXEL_MEASURES, measure_pixels(np.full((20, 30, 3), 0.5, dtype=np.float32))))
    assert values["brightness"] == pytest.approx(0.5, abs=1e-6)
    for name in ("contrast", "saturation", "colourfulness", "sharpness", "noise level"):
        assert values[name] == pytest.approx(0.0, abs=1e-5), name
    assert COLOUR_NAMES[int(values["dominant colour"])] == "gray"


def test_noise_estimate_recovers_the_sigma_of_added_noise():
    rng = np.random.default_rng(0)
    noisy = np.clip(0.5 + rng.normal(0, 10 / 255, size=(256, 256, 3)), 0, 1).astype(np.float32)
    values = dict(zip(PIXEL_MEASURES, measure_pixels(noisy)))
    assert values["noise level"] == pytest.approx(10 * np.sqrt(0.299**2 + 0.587**2 + 0.114**2),
                                                  rel=0.05)  # sigma of luma


def test_colour_names_of_typical_pixels():
    pixels = np.array([[0, 0, 0], [1, 1, 1], [0.5, 0.5, 0.5], [1, 0, 0], [0.65, 0.16, 0.16], [1, 1, 0], [0, 1, 0],
                       [0, 0.5, 0.5], [0, 0, 1], [1, 0.5, 0], [0.5, 0, 1], [1, 0.4, 0.7]], dtype=np.float32)
    assert [COLOUR_NAMES[i] for i in colour_names(pixels)] == [
        "black", "white", "gray", "red", "brown", "yellow", "green", "teal", "blue", "orange", "purple", "pink"]


def test_measured_tags_find_the_colour_of_the_subject(colour_project):
    tag_project(colour_project, attributes=["dominant colour", "brightness", "aspect ratio", "resolution"],
                views=task_of(colour_project).views)
    tags = current_tags(colour_project).tags
    assert list(tags["dominant colour"].astype(str)) == ["red", "green", "blue"] * 4
    assert set(tags["brightness"].astype(str)) == {"bright"}
    assert set(tags["aspect ratio"].astype(str)) == {"square"} and set(tags["resolution"].astype(str)) == {"low"}
    quality = project_tag_quality(colour_project, mapping={"dominant colour": "color"})
    assert quality.accuracy("dominant colour") == 1.0


# ----- corrections ----------------------------------------------------------------------------------------
def test_corrections_override_model_tags_and_survive_re_tagging(colour_project):
    tag_project(colour_project, attributes=["dominant colour"], views=task_of(colour_project).views)
    first = int(colour_project.samples().index[0])
    tag_store.correct_tags(colour_project, "dominant colour", [first], "pink", author="ana")
    tag_project(colour_project, attributes=["dominant colour"], views=task_of(colour_project).views)
    table = current_tags(colour_project)
    assert table.tags.at[first, "dominant colour"] == "pink" and table.corrected.at[first, "dominant colour"]
    assert current_tags(colour_project, with_corrections=False).tags.at[first, "dominant colour"] == "red"
    tag_store.correct_tags(colour_project, "dominant colour", [first], None, author="ana")
    assert current_tags(colour_project).tags.at[first, "dominant colour"] == "red"
    log = colour_project.audit_log()
    assert log["action"].tolist()[-1] == "correct tag" and log["actor"].tolist()[-1] == "ana"


def test_tags_from_an_older_schema_stay_readable(colour_project):
    tag_project(colour_project, attributes=["dominant colour"], views=task_of(colour_project).views)
    schema = load_schema(colour_project)
    fewer = schema["dominant colour"].model_copy(update={"tags": ("black", "white")})
    save_schema(colour_project, schema.replace(fewer))
    tags = current_tags(colour_project).tags["dominant colour"]
    assert list(tags.astype(str)[:3]) == ["red", "green", "blue"]
    assert list(tags.cat.categories[:2]) == ["black", "white"]


# ----- encoders, embedding cache and probes ---------------------------------------------------------------
@pytest.mark.parametrize("spec", ["tiny-open_clip", "tiny-transformers"])
def test_tiny_models_run_the_real_code_paths(colour_project, spec, tmp_path, monkeypatch):
    monkeypatch.setenv("HIBUG_CACHE", str(tmp_path / "cache"))
    encoder = load_encoder(spec)
    first = embed_project(colour_project, encoder)
    assert first.embedding.shape == (12, 64)
    assert np.linalg.norm(first.embedding, axis=1) == pytest.approx(np.ones(12), abs=1e-2)
    parts = colour_project.arrays.names(f"embeddings/{encoder.key}/")
    again = embed_project(colour_project, encoder)
    assert colour_project.arrays.names(f"embeddings/{encoder.key}/") == parts, "cached images are not re-encoded"
    assert np.array_equal(again.embedding, first.embedding)
    run_ids = tag_project(colour_project, encoder=spec, attributes=["color", "is round"],
                          views=task_of(colour_project).views)
    result = tag_store.load_run(colour_project, run_ids[0])
    assert result.tag_index.shape == (12, 2) and (result.tag_index >= 0).all()
    assert ((result.score > 0) & (result.score <= 1)).all() and (result.margin >= 0).all()


def test_hub_models_offline_fail_with_advice(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelLoadError, match="point at local weights"):
        load_encoder("transformers:openai/clip-vit-base-patch32")
    with pytest.raises(ModelLoadError, match="open_clip:<architecture>:/path/to/checkpoint.bin"):
        load_encoder("open_clip:ViT-B-32:laion2b_s34b_b79k")
    with pytest.raises(ModelLoadError, match="unknown encoder 'clip'"):
        load_encoder("clip")


def test_missing_embeddings_say_how_to_make_them(colour_project):
    with pytest.raises(TaggingError, match="hibug embed --encoder conse"):
        stored_embeddings(colour_project, "conse")


def test_a_probe_needs_two_examples_of_two_tags(colour_project):
    ids = colour_project.samples().index
    with pytest.raises(TaggingError, match="at least 2 examples of at least two tags; now: red: 1, green: 0, blue: 0"):
        teach(colour_project, "color", {int(ids[0]): "red"}, encoder="tiny-open_clip")
    with pytest.raises(TaggingError, match="does not have: purple"):
        teach(colour_project, "color", {int(ids[0]): "purple", int(ids[1]): "red"}, encoder="tiny-open_clip")


def test_low_margin_tags_are_flagged_uncertain_until_a_person_sets_them(colour_project):
    ids = colour_project.samples().index.to_numpy()
    margins = np.linspace(0, 0.22, 12, dtype=np.float32)[:, None]
    result = tag_store.TagResult(ids, {"color": ("red", "green", "blue")}, np.zeros((12, 1), np.int16),
                                 np.ones((12, 1), np.float32), margins)
    tag_store.save_run(colour_project, result, method="zero-shot", encoder="test")
    assert current_tags(colour_project).uncertain(0.1)["color"].sum() == 0  # the imported colours stay in force
    run = int(tag_store.runs(colour_project)["id"].max())
    tag_store.choose_source(colour_project, "color", tag_store.run_key(run), author="ana")  # a person picks the run
    table = current_tags(colour_project)
    assert table.source["color"] == f"run:{run}"
    assert table.uncertain(0.1)["color"].tolist() == [True] * 5 + [False] * 7
    tag_store.correct_tags(colour_project, "color", ids[:2], "green", kind="confirm")
    assert table.uncertain(0.1)["color"].sum() == 5  # the old table is a snapshot
    assert current_tags(colour_project).uncertain(0.1)["color"].sum() == 3


def test_quality_reports_accuracy_precision_and_confusion(colour_project):
    ids = colour_project.samples().index.to_numpy()
    said = np.array([0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 0, 0], dtype=np.int16)  # truth cycles red, green, blue
    result = tag_store.TagResult(ids, {"color": ("red", "green", "blue")}, said[:, None],
                                 np.ones((12, 1), np.float32), np.ones((12, 1), np.float32))
    tag_store.save_run(colour_project, result, method="zero-shot", encoder="test")
    quality = project_tag_quality(colour_project)
    assert quality.accuracy("color") == pytest.approx(10 / 12)
    red = quality.per_tag.set_index(["attribute", "tag"]).loc[("color", "red")]
    assert (red["support"], red["predicted"], red["precision"], red["recall"]) == (4, 6, 4 / 6, 1.0)
    assert quality.confusion["color"].loc["green", "red"] == 1 and quality.confusion["color"].loc["blue", "red"] == 1


def test_open_clip_loads_a_local_checkpoint_for_a_registered_architecture(colour_project, tmp_path):
    import json

    import open_clip
    import torch

    from hibug_core.embeddings.tiny import TINY_IMAGE_SIZE, TINY_WIDTH, build_tiny_open_clip

    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "hibug-test-tiny.json").write_text(json.dumps({
        "embed_dim": TINY_WIDTH,
        "vision_cfg": {"layers": 2, "width": TINY_WIDTH, "head_width": 32, "patch_size": 8,
                       "image_size": TINY_IMAGE_SIZE},
        "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": TINY_WIDTH, "heads": 2, "layers": 2}}))
    open_clip.add_model_config(tmp_path / "configs")
    model, _, _ = build_tiny_open_clip(seed=3)
    torch.save(model.state_dict(), tmp_path / "tiny.pt")
    encoder = load_encoder(f"open_clip:hibug-test-tiny:{tmp_path / 'tiny.pt'}")
    texts = ["a red square", "a blue circle"]
    with torch.no_grad():
        expected = model.eval().encode_text(open_clip.tokenizer.SimpleTokenizer()(texts))
    assert np.allclose(encoder.encode_texts(texts), (expected / expected.norm(dim=1, keepdim=True)).numpy(), atol=1e-5)
    assert embed_project(colour_project, encoder).embedding.shape == (12, TINY_WIDTH)


def test_two_editors_of_one_schema_never_lose_an_edit(colour_project):
    from hibug_core.store.attribute_versions import StaleSchemaError, merge_schemas

    start = latest_version(colour_project)
    base = load_schema(colour_project)
    # Ana adds a tag to color; Ben, from the same version, disables "is round" and adds an attribute.
    ana = base.replace(base["color"].model_copy(update={"tags": ("red", "green", "blue", "pink")}))
    ben = base.replace(base["is round"].model_copy(update={"enabled": False})).replace(
        Attribute(name="size", tags=("small", "large")))
    saved = save_schema(colour_project, ana, author="ana", base_version=start)
    with pytest.raises(StaleSchemaError, match=f"version {saved} was saved by ana") as stale:
        save_schema(colour_project, ben, author="ben", base_version=start)
    assert stale.value.newest == saved and latest_version(colour_project) == saved
    merged, conflicts = merge_schemas(base, ben, load_schema(colour_project, stale.value.newest))
    assert conflicts == []
    assert merged["color"].tags[-1] == "pink" and not merged["is round"].enabled
    assert merged["size"].tags == ("small", "large")
    save_schema(colour_project, merged, author="ben", base_version=stale.value.newest)
    # Both change color: the stored one is kept and the conflict is named.
    current = load_schema(colour_project)
    mine = current.replace(current["color"].model_copy(update={"tags": ("red", "blue")}))
    theirs = current.replace(current["color"].model_copy(update={"tags": ("red", "green")}))
    merged, conflicts = merge_schemas(current, mine, theirs)
    assert merged["color"].tags == ("red", "green")
    assert conflicts == ["'color' was changed in both edits; the stored version is kept"]


def test_offline_library_covers_the_demo_bug_attributes():
    from hibug_core.attributes.library import LIBRARY, choose_task_type, chosen_entry, library_schema
    from hibug_core.demo.attributes import TASK

    schema = library_schema(TASK, ["circle", "rectangle", "triangle"])
    assert {"color", "size"} <= set(schema.names()) and "blue" in schema["color"].tags
    assert {a.group for a in schema.attributes} == {"main object", "background", "global"}
    assert all(a.name.startswith("is ") for a in schema.attributes if a.kind == "binary")
    assert {a.source for a in schema.attributes} == {"library", "measured"}
    assert choose_task_type("detect cars in traffic") == "detection"
    assert choose_task_type("classify celebrity faces", ["smiling", "not smiling"]) == "people"
    assert choose_task_type("", ["tabby cat", "beagle"]) == "animals"
    assert choose_task_type("sort screws from bolts") == "objects"
    # several domains named: the generic library, with why (it was 'animals': fur colour and habitat for documents)
    kind, why = chosen_entry("people, objects, textures and documents", ["person", "cat", "invoice"])
    assert kind == "objects" and why.startswith("the task speaks of several domains (animals (cat); people")
    assert chosen_entry("", ["tabby cat", "beagle"])[1] == ("the task and its classes speak of animals (cat) and of "
                                                          "no other domain")
    assert "not visible" in dict((a.name, a.tags) for a in LIBRARY.get("people").build().attributes)["hair color"]


def test_an_unreadable_image_is_named_and_the_others_are_kept(colour_project, tmp_path, monkeypatch):
    from hibug_core.embeddings.compute import embedding_cache

    monkeypatch.setenv("HIBUG_CACHE", str(tmp_path / "cache"))
    first = colour_project.samples()["image_path"].iloc[0]
    with open(first, "r+b") as handle:
        handle.truncate(40)
    encoder = load_encoder("tiny-open_clip")
    with pytest.raises(TaggingError, match=r"1 image\(s\) could not be read, e\.g\. .*0\.png; fix the file, or "
                                           "remove such samples with `hibug remove"):
        embed_project(colour_project, encoder)
    assert len(embedding_cache(colour_project, encoder.key)) == 5  # 6 distinct pictures, the broken one not cached
