"""Tiny randomly initialised CLIP models built from config (seeded): the real code paths, without weights."""
from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

TINY_IMAGE_SIZE = 32
TINY_WIDTH = 64
VOCAB_SIZE = 49408


def build_tiny_open_clip(seed: int = 0):
    """(model, transform, tokenizer) of a 2-layer open_clip ViT/text transformer with random weights."""
    import open_clip
    import torch

    torch.manual_seed(seed)
    model = open_clip.CLIP(
        embed_dim=TINY_WIDTH,
        vision_cfg=open_clip.CLIPVisionCfg(layers=2, width=TINY_WIDTH, head_width=32, patch_size=8,
                                           image_size=TINY_IMAGE_SIZE),
        text_cfg=open_clip.CLIPTextCfg(context_length=77, vocab_size=VOCAB_SIZE, width=TINY_WIDTH, heads=2, layers=2))
    transform = open_clip.image_transform(TINY_IMAGE_SIZE, is_train=False)
    return model, transform, open_clip.tokenizer.SimpleTokenizer()


def clip_bpe_files(folder: Path) -> tuple[Path, Path]:
    """CLIP's vocab.json and merges.txt, rebuilt from the BPE table that open_clip ships."""
    from open_clip.tokenizer import bytes_to_unicode, default_bpe

    lines = gzip.open(default_bpe()).read().decode("utf-8").split("\n")
    merges = [tuple(line.split()) for line in lines[1:49152 - 256 - 2 + 1]]
    vocab = list(bytes_to_unicode().values())
    vocab += [v + "</w>" for v in vocab] + ["".join(m) for m in merges] + ["<|startoftext|>", "<|endoftext|>"]
    vocab_file, merges_file = folder / "vocab.json", folder / "merges.txt"
    vocab_file.write_text(json.dumps({token: i for i, token in enumerate(vocab)}))
    merges_file.write_text("#version: 0.2\n" + "\n".join(" ".join(m) for m in merges) + "\n")
    return vocab_file, merges_file


def cache_root(root: Path | None = None) -> Path:
    return Path(root or os.environ.get("HIBUG_CACHE", Path.home() / ".cache" / "hibug"))


def build_once(folder: Path, done_marker: str, build) -> Path:
    """`folder`, built by build(staging folder) the first time; concurrent builders never see a half-built one."""
    if (folder / done_marker).exists():
        return folder
    staging = folder.with_name(folder.name + f".tmp{os.getpid()}")
    staging.mkdir(parents=True, exist_ok=True)
    build(staging)
    try:
        staging.rename(folder)
    except OSError:  # another process finished first
        import shutil

        shutil.rmtree(staging, ignore_errors=True)
    return folder


def tiny_transformers_folder(seed: int = 0, root: Path | None = None) -> Path:
    """A local transformers CLIP folder (config, random weights, tokenizer, preprocessor), built once."""

    def build(staging: Path) -> None:
        import torch
        from transformers import CLIPConfig, CLIPModel, CLIPTokenizer

        torch.manual_seed(seed)
        layer = dict(hidden_size=TINY_WIDTH, intermediate_size=2 * TINY_WIDTH, num_hidden_layers=2,
                     num_attention_heads=2)
        config = CLIPConfig(text_config=dict(vocab_size=VOCAB_SIZE, max_position_embeddings=77, **layer),
                            vision_config=dict(image_size=TINY_IMAGE_SIZE, patch_size=8, **layer),
                            projection_dim=TINY_WIDTH)
        CLIPModel(config).save_pretrained(staging)
        vocab_file, merges_file = clip_bpe_files(staging)
        CLIPTokenizer(str(vocab_file), str(merges_file)).save_pretrained(staging)
        (staging / "preprocessor_config.json").write_text(json.dumps({
            "image_processor_type": "CLIPImageProcessor", "size": {"shortest_edge": TINY_IMAGE_SIZE},
            "crop_size": {"height": TINY_IMAGE_SIZE, "width": TINY_IMAGE_SIZE},
            "image_mean": [0.4815, 0.4578, 0.4082], "image_std": [0.2686, 0.2613, 0.2758]}))

    return build_once(cache_root(root) / f"tiny-transformers-clip-seed{seed}", "preprocessor_config.json", build)


def tiny_diffusion_folder(seed: int = 0, root: Path | None = None) -> Path:
    """A local Stable Diffusion pipeline folder with a tiny random UNet, VAE and CLIP text encoder, built once: the
    real diffusers code path (it draws noise, not pictures)."""

    def build(staging: Path) -> None:
        import torch
        from diffusers import AutoencoderKL, DDIMScheduler, StableDiffusionPipeline, UNet2DConditionModel
        from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

        torch.manual_seed(seed)
        unet = UNet2DConditionModel(
            sample_size=8, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(16, 32),
            down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
            up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
            cross_attention_dim=TINY_WIDTH, attention_head_dim=2, norm_num_groups=8)
        vae = AutoencoderKL(in_channels=3, out_channels=3, latent_channels=4, block_out_channels=(16, 32),
                            down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
                            norm_num_groups=8, sample_size=16)
        text_encoder = CLIPTextModel(CLIPTextConfig(vocab_size=VOCAB_SIZE, hidden_size=TINY_WIDTH,
                                                    intermediate_size=2 * TINY_WIDTH, num_hidden_layers=2,
                                                    num_attention_heads=2, max_position_embeddings=77))
        vocab_file, merges_file = clip_bpe_files(staging)
        tokenizer = CLIPTokenizer(str(vocab_file), str(merges_file), model_max_length=77)
        scheduler = DDIMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                                  clip_sample=False, set_alpha_to_one=False, steps_offset=1)
        pipeline = StableDiffusionPipeline(vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, unet=unet,
                                           scheduler=scheduler, safety_checker=None, feature_extractor=None,
                                           requires_safety_checker=False)
        pipeline.save_pretrained(staging)
        vocab_file.unlink()
        merges_file.unlink()

    return build_once(cache_root(root) / f"tiny-stable-diffusion-seed{seed}", "model_index.json", build)
