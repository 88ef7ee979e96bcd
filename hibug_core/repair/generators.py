"""Image generators behind one interface: diffusers pipelines (hub id or local path), the OpenAI images API, and a
procedural renderer of the easy-vqa shape world that stands in for a diffusion model on the demo, offline."""
from __future__ import annotations

import base64
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from hibug_core.errors import ModelLoadError
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.registry import Registry, UnknownChoice

logger = logging.getLogger(__name__)

SHAPE_RENDERER = "shape-world renderer"
GENERATORS = Registry("generator")


class Generator(Protocol):
    name: str

    def generate(self, prompts: list[str], seeds: list[int]):
        """One PIL image per (prompt, seed)."""


def generate_images(generator: Generator, prompts: list[str], seeds: list[int], *, batch_size: int = 4,
                    progress: ProgressCallback = no_progress) -> list:
    """Images in batches, reporting progress after each (a job cancels by raising from the progress callback)."""
    images = []
    progress("generating images", 0, len(prompts))
    for start in range(0, len(prompts), batch_size):
        images += generator.generate(prompts[start:start + batch_size], seeds[start:start + batch_size])
        progress("generating images", len(images), len(prompts))
    return images


# ----- the shape world, drawn ----------------------------------------------------------------------------------
COLOURS = {"black": (0, 0, 0), "blue": (0, 0, 255), "brown": (165, 42, 42), "gray": (128, 128, 128),
            "green": (0, 255, 0), "red": (255, 0, 0), "teal": (0, 128, 128), "yellow": (255, 255, 0)}
_SHAPE_WORDS = {"circle": "circle", "circles": "circle", "rectangle": "rectangle", "rectangles": "rectangle",
                "square": "rectangle", "triangle": "triangle", "triangles": "triangle"}
_SIDES = {"small": (10, 18), "medium": (19, 26), "large": (27, 36)}  # measure_geometry's size thirds
_HORIZONTAL = {"left": 0, "center": 1, "centre": 1, "right": 2}
_VERTICAL = {"top": 0, "middle": 1, "bottom": 2}
# The scene backgrounds the renderer draws when a prompt names one (Chegini and Feizi's uncommon backgrounds,
# prompts.DEFAULT_BACKGROUNDS): the word that names it -> its name. A prompt naming none gets the plain light one.
_BACKGROUND_WORDS = {"snow": "snow", "underwater": "underwater", "water": "underwater", "desert": "desert",
                     "night": "night", "kitchen": "kitchen", "beach": "beach", "forest": "forest", "street": "street",
                     "city": "street", "sky": "sky", "fog": "fog", "stage": "stage", "cave": "cave"}
PLAIN = "plain"


def scene_from_prompt(prompt: str, seed: int) -> dict[str, str]:
    """The shape, colour, size and position a prompt names; what it leaves open is drawn at random (seeded)."""
    words = re.findall(r"[a-z]+", prompt.lower())
    rng = np.random.default_rng(seed)

    def pick(meaning: dict, choices):
        named = [meaning[w] for w in words if w in meaning]
        return named[0] if named else choices[rng.integers(len(choices))]

    scene = {"shape": pick(_SHAPE_WORDS, ("circle", "rectangle", "triangle")),
             "color": pick({c: c for c in COLOURS}, tuple(COLOURS)),
             "size": pick({s: s for s in _SIDES}, tuple(_SIDES)),
             "horizontal position": ("left", "center", "right")[pick(_HORIZONTAL, (0, 1, 2))],
             "vertical position": ("top", "middle", "bottom")[pick(_VERTICAL, (0, 1, 2))]}
    named = [_BACKGROUND_WORDS[w] for w in words if w in _BACKGROUND_WORDS]  # never drawn at random: a prompt
    return {**scene, "background": named[0] if named else PLAIN}  # naming none is the demo's own plain scene


def render_scene(scene: dict[str, str], seed: int, size: int = 64):
    """A 64x64 easy-vqa-like image: one flat shape on a light background, or on the scene background the prompt named
    (the shape and its place drawn as on the plain one)."""
    from PIL import Image, ImageDraw

    rng = np.random.default_rng(seed + 1_000_003)
    background = tuple(int(v) for v in rng.integers(200, 256, 3))
    kind = scene.get("background", PLAIN)
    image = (Image.new("RGB", (size, size), background) if kind == PLAIN
             else Image.fromarray(_background_pixels(kind, size, np.random.default_rng(seed + 2_000_003))))
    low, high = _SIDES[scene["size"]]
    side = int(rng.integers(low, high + 1))
    third = size / 3
    column = ("left", "center", "right").index(scene["horizontal position"])
    row = ("top", "middle", "bottom").index(scene["vertical position"])
    # The centre inside its third, and the shape inside the image.
    cx = float(np.clip(rng.uniform(third * column + 2, third * (column + 1) - 2), side / 2, size - side / 2))
    cy = float(np.clip(rng.uniform(third * row + 2, third * (row + 1) - 2), side / 2, size - side / 2))
    box = (round(cx - side / 2), round(cy - side / 2), round(cx - side / 2) + side - 1, round(cy - side / 2) + side - 1)
    draw = ImageDraw.Draw(image)
    colour = COLOURS[scene["color"]]
    if scene["shape"] == "circle":
        draw.ellipse(box, fill=colour)
    elif scene["shape"] == "rectangle":
        short = int(rng.integers(int(side * 0.6), side + 1))
        if rng.random() < 0.5:
            draw.rectangle((box[0], box[1] + (side - short) // 2, box[2], box[1] + (side - short) // 2 + short - 1),
                           fill=colour)
        else:
            draw.rectangle((box[0] + (side - short) // 2, box[1], box[0] + (side - short) // 2 + short - 1, box[3]),
                           fill=colour)
    else:
        draw.polygon([(box[0], box[3]), (box[2], box[3]), ((box[0] + box[2]) / 2, box[1])], fill=colour)
    return image


def _background_pixels(kind: str, size: int, rng: np.random.Generator) -> np.ndarray:
    """A named scene background, (size, size, 3) uint8: a base colour, its texture and noise."""
    y, x = np.mgrid[0:size, 0:size] / max(size - 1, 1)
    noise = rng.normal(0, 1, (size, size, 1))

    def flat(colour, spread: float = 8.0) -> np.ndarray:
        return np.asarray(colour, float)[None, None, :] + spread * noise

    if kind == "snow":
        pixels = flat((240, 243, 248), 6) - 60 * (rng.random((size, size, 1)) < 0.04)
    elif kind == "underwater":
        pixels = flat((20, 90, 170)) + 40 * (1 - y)[..., None] + 25 * np.sin(12 * x + 5 * y)[..., None]
    elif kind == "desert":
        pixels = flat((214, 184, 128), 10) + 12 * np.sin(9 * x + 3 * y)[..., None]
    elif kind == "night":
        pixels = flat((15, 18, 45), 4) + 200 * (rng.random((size, size, 1)) < 0.015)
    elif kind == "kitchen":
        grout = ((np.arange(size) % 12 == 0)[:, None] | (np.arange(size) % 12 == 0)[None, :])[..., None]
        pixels = flat((225, 215, 190), 4) - 90 * grout
    elif kind == "beach":
        pixels = np.where((y < 0.45)[..., None], flat((140, 200, 240), 5), flat((222, 200, 150), 9))
    elif kind == "forest":
        pixels = flat((35, 85, 40), 22)
    elif kind == "street":
        stripe = ((np.abs(y - 0.5) < 0.03) & (x * 8 % 2 < 1))[..., None]
        pixels = flat((95, 95, 100), 10) + 150 * stripe
    elif kind == "sky":
        pixels = flat((120, 180, 245), 3) + 70 * y[..., None]
    elif kind == "fog":
        pixels = flat((196, 198, 202), 2) + 10 * np.sin(3 * x + 2 * y)[..., None]
    elif kind == "stage":
        spot = (((x - 0.5) / 0.35) ** 2 + ((y - 0.6) / 0.3) ** 2 < 1)[..., None]
        pixels = np.where(spot, flat((235, 220, 170), 4), flat((25, 20, 30), 4))
    elif kind == "cave":
        pixels = flat((70, 60, 55), 18)
    else:
        raise ValueError(f"no background '{kind}'")
    return np.clip(pixels, 0, 255).astype(np.uint8)


class ShapeWorldRenderer:
    """Draws easy-vqa shapes from a prompt's words: stands in for a diffusion model on the demo, offline. It is a
    renderer, not a generative model, and says so wherever its images are shown."""

    name = SHAPE_RENDERER

    def generate(self, prompts: list[str], seeds: list[int]):
        return [render_scene(scene_from_prompt(p, s), s) for p, s in zip(prompts, seeds)]

    @staticmethod
    def describe(prompt: str, seed: int) -> str:
        """What the image of (prompt, seed) shows, in words: the renderer's own caption of it."""
        scene = scene_from_prompt(prompt, seed)
        said = (f"A {scene['size']} {scene['color']} {scene['shape']}. It is at the {scene['vertical position']} "
                f"{scene['horizontal position']} of the image.")
        return said if scene["background"] == PLAIN else f"{said} The background is {scene['background']}."


# ----- diffusers ---------------------------------------------------------------------------------------------------
HOW_TO_PROVIDE = ("On a machine with internet run `huggingface-cli download <hub id> --local-dir <folder>`, copy the "
                  "folder here and use diffusers:<folder>; or use the shape-world renderer on the demo")


def missing_weights(model: str) -> str | None:
    """Why `model` (a folder or a hub id) cannot load offline and how to provide it; None when its weights are here."""
    if model == "tiny-random":
        return None
    folder = Path(model).expanduser()
    if folder.exists():
        return None if (folder / "model_index.json").exists() else \
            f"{folder} has no model_index.json: it is not a diffusers pipeline folder. {HOW_TO_PROVIDE}"
    if "/" in model and not model.startswith((".", "/", "~")):
        from huggingface_hub import try_to_load_from_cache

        if isinstance(try_to_load_from_cache(model, "model_index.json"), str):
            return None
        return f"the weights of '{model}' are not in this machine's Hugging Face cache. {HOW_TO_PROVIDE}"
    return f"no folder {folder}. {HOW_TO_PROVIDE}"


@dataclass
class DiffusersGenerator:
    """A text-to-image diffusers pipeline from a hub id (offline: already in the Hugging Face cache) or a folder."""

    model: str
    device: str | None = None
    steps: int = 25
    guidance: float = 7.5
    height: int | None = None  # None: the pipeline's own
    width: int | None = None

    def __post_init__(self):
        import torch

        try:
            from diffusers import AutoPipelineForText2Image
        except ImportError as error:
            raise ModelLoadError("diffusers is missing; reinstall hibug (`pip install -e .`)") from error
        if self.model == "tiny-random":
            from hibug_core.embeddings.tiny import tiny_diffusion_folder

            source = str(tiny_diffusion_folder())
        else:
            source = str(Path(self.model).expanduser()) if Path(self.model).expanduser().exists() else self.model
        self.device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = torch.float16 if self.device.startswith("cuda") else torch.float32
        try:
            pipeline = AutoPipelineForText2Image.from_pretrained(source, dtype=dtype, local_files_only=True)
        except (OSError, ValueError) as error:
            raise ModelLoadError(f"no diffusion weights for '{self.model}' on this machine "
                                 f"({str(error).splitlines()[0][:200]}). {HOW_TO_PROVIDE}") from None
        if getattr(pipeline, "safety_checker", None) is not None:
            pipeline.safety_checker = None  # synthetic training data; the checker blanks false positives
        pipeline.set_progress_bar_config(disable=True)
        self.pipeline = pipeline.to(self.device)
        self.name = f"diffusers:{self.model}"

    def generate(self, prompts: list[str], seeds: list[int]):
        import torch

        generators = [torch.Generator(self.device).manual_seed(int(s)) for s in seeds]
        extra = {k: v for k, v in (("height", self.height), ("width", self.width)) if v}
        return self.pipeline(prompts, num_inference_steps=self.steps, guidance_scale=self.guidance,
                             generator=generators, **extra).images


# ----- the OpenAI images API ---------------------------------------------------------------------------------------
@dataclass
class OpenAIImagesGenerator:
    """Images from an OpenAI-compatible images endpoint. The API takes no seed: repeated prompts differ anyway."""

    model: str = "gpt-image-1"
    size: str = "1024x1024"
    base_url: str | None = None
    api_key: str | None = None

    def __post_init__(self):
        from hibug_core.llm.client import LLMConfig, make_client

        self.client = make_client(LLMConfig(base_url=self.base_url, model=self.model), self.api_key)
        self.name = f"openai:{self.model}"

    def generate(self, prompts: list[str], seeds: list[int]):
        from hibug_core.image_loader import open_image

        images = []
        for prompt in prompts:
            extra = {"response_format": "b64_json"} if self.model.startswith("dall-e") else {}
            try:
                reply = self.client.images.generate(model=self.model, prompt=prompt, n=1, size=self.size, **extra)
            except Exception as error:  # noqa: BLE001 - the client's errors: connection, auth, rate limit, request
                raise ModelLoadError(f"the images API at {self.base_url or 'api.openai.com'} failed: "
                                     f"{type(error).__name__}: {str(error)[:200]}") from None
            data = reply.data[0].b64_json if reply.data else None
            if not data:
                raise ModelLoadError("the images API returned no image data (b64_json); check the model name")
            images.append(open_image(base64.b64decode(data)))
        return images


@GENERATORS.register(SHAPE_RENDERER, "procedural easy-vqa shapes drawn from the prompt's words, on the uncommon "
                     "background it names (the demo's offline stand-in for a diffusion model; not a generative model)")
def _shape_renderer(**_) -> Generator:
    return ShapeWorldRenderer()


@GENERATORS.register("diffusers", "a Stable Diffusion family pipeline through diffusers (fp16 on GPU, fp32 on CPU); "
                     "offline it needs the weights in a local folder or the Hugging Face cache (diffusers:tiny-random: "
                     "a tiny random pipeline built from config, for tests)", form="diffusers:<hub id or folder>",
                     missing=lambda model: missing_weights(model) if model else "name the pipeline: a local folder "
                     "or a hub id already downloaded")
def _diffusers(model: str, *, steps: int, device: str | None, **_) -> Generator:
    return DiffusersGenerator(model, device=device, steps=steps)


@GENERATORS.register("openai", "the OpenAI images API (e.g. openai:gpt-image-1); key from OPENAI_API_KEY or Streamlit "
                     "secrets", form="openai:<model>", secret="OPENAI_API_KEY")
def _openai_images(model: str, *, api_key: str | None, **_) -> Generator:
    import os

    return OpenAIImagesGenerator(model, base_url=os.environ.get("HIBUG_IMAGES_BASE_URL") or None, api_key=api_key)


def load_generator(spec: str, *, api_key: str | None = None, steps: int = 25, device: str | None = None) -> Generator:
    """A generator by name: "shape-world renderer", "diffusers:<hub id or folder>" or "openai:<model>"."""
    try:
        GENERATORS.get(spec)
    except UnknownChoice as error:
        raise ModelLoadError(str(error)) from None
    return GENERATORS.build(spec, api_key=api_key, steps=steps, device=device)
