"""In-process vision-language models through the one LLM path: a tiny random LLaVA built from config (no download)
answers tagging, tag proposal and captioning; its answers are junk, so they are validated and reported, never stored."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

import hibug_core  # noqa: F401  (the torch/torchvision shim before transformers imports torchvision)
from hibug_core.errors import TaggingError
from hibug_core.llm.client import LLMConfig, LLMUnavailable
from hibug_core.store import tag_store
from hibug_core.tagging.run import current_tags
from hibug_core.tasks import task_of


def build_tiny_vlm(folder: Path) -> None:
    """A randomly initialised LLaVA (CLIP vision tower, Llama text model) with a byte-level tokenizer and a chat
    template, saved as a transformers folder."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
        PreTrainedTokenizerFast,
    )

    byte_level = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))},
                                      merges=[]))
    byte_level.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    byte_level.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=byte_level, bos_token="<s>", eos_token="</s>",
                                        pad_token="<pad>")
    tokenizer.add_special_tokens({"additional_special_tokens": ["<image>"]})
    template = ("{% for m in messages %}{{ m['role'] }}: {% for p in m['content'] %}{% if p['type'] == 'image' %}"
                "<image>{% else %}{{ p['text'] }}{% endif %}{% endfor %}\n{% endfor %}"
                "{% if add_generation_prompt %}assistant: {% endif %}")
    processor = LlavaProcessor(image_processor=CLIPImageProcessor(size={"shortest_edge": 32},
                                                                  crop_size={"height": 32, "width": 32}),
                               tokenizer=tokenizer, patch_size=8, vision_feature_select_strategy="default",
                               chat_template=template, image_token="<image>", num_additional_image_tokens=1)
    torch.manual_seed(0)
    tiny = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2)
    config = LlavaConfig(
        vision_config=CLIPVisionConfig(**tiny, image_size=32, patch_size=8),
        text_config=LlamaConfig(**tiny, vocab_size=len(tokenizer), num_key_value_heads=2, max_position_embeddings=2048,
                                bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                                pad_token_id=tokenizer.pad_token_id),
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"), vision_feature_select_strategy="default",
        vision_feature_layer=-1)
    LlavaForConditionalGeneration(config).save_pretrained(folder)
    processor.save_pretrained(folder)


@pytest.fixture(scope="module")
def tiny_vlm(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("vlm") / "tiny-llava"
    build_tiny_vlm(folder)
    return f"transformers:{folder}"


def test_junk_answers_of_an_in_process_model_are_validated_and_reported_not_stored(colour_project, tiny_vlm,
                                                                                  monkeypatch):
    from hibug_core.llm import local
    from hibug_core.tagging.mllm import _answers, tag_with_llm

    monkeypatch.setattr(local, "BATCH_WAIT_S", 0.5)  # concurrent requests surely meet in one batch
    monkeypatch.setattr(local, "MAX_NEW_TOKENS", 48)  # junk either way; shorter is faster
    batches = []
    vlm = local.load_vlm(tiny_vlm)
    generate = vlm._generate
    monkeypatch.setattr(vlm, "_generate", lambda batch: batches.append(len(batch)) or generate(batch))
    before = current_tags(colour_project).tags.copy()
    with pytest.raises(TaggingError) as raised:
        tag_with_llm(colour_project, LLMConfig(model=tiny_vlm, attempts=2, concurrency=4),
                     views=task_of(colour_project).views)
    message = str(raised.value)
    assert "no valid answer for any of 12 image(s)" in message and "tags stored before are unchanged" in message
    assert current_tags(colour_project).tags.equals(before)
    runs = tag_store.runs(colour_project)
    assert runs["status"].iat[-1] == "failed" and runs["encoder"].iat[-1] == tiny_vlm
    answers = _answers(colour_project, int(runs["id"].iat[-1]))
    assert len(answers) == 12 and answers["answer_json"].isna().all()
    assert answers["error"].str.contains(f"no valid answer from {tiny_vlm} in process after 2 attempts").all()
    assert sum(batches) == 24 and max(batches) > 1  # 12 images, 2 attempts each, asked in batches


def test_tag_proposal_and_captions_run_in_process(colour_project, tiny_vlm):
    from hibug_core.attributes.schema import AttributeSchema
    from hibug_core.repair.failure_search import LLMCaptioner
    from hibug_core.store.attribute_versions import load_schema
    from hibug_core.tagging.suggest import _values_from_llm

    schema: AttributeSchema = load_schema(colour_project)
    paths = list(colour_project.samples()["image_path"][:2])
    seen, notes = _values_from_llm(paths, ["cat", "dog"], schema, LLMConfig(model=tiny_vlm, attempts=1), None)
    assert len(notes) == 2 and all(n.startswith("an answer was skipped: ") for n in notes)  # junk: nothing proposed
    assert not any(seen.values())
    caption = LLMCaptioner(LLMConfig(model=tiny_vlm, attempts=1)).caption(paths[0], "a photo of a cat", 0)
    assert isinstance(caption, str) and "\n" not in caption  # any one-line text is a caption, junk included


def test_a_model_that_is_not_there_fails_at_once_with_advice():
    from hibug_core.llm.local import load_vlm

    started = time.perf_counter()
    with pytest.raises(LLMUnavailable, match=r"transformers:nobody/no-such-vlm: cannot load it .*offline, give a "
                                             r"folder saved with save_pretrained"):
        load_vlm("transformers:nobody/no-such-vlm")
    assert time.perf_counter() - started < 30
