"""The registry of the model under test, one for every task: the user's network named by a spec they can type,
loaded with its library's own architecture code and preprocessing (timm's data config, torchvision's weight
transforms, the transformers image processor), never a hand-written copy; the zoo's networks answer to it the same
way. Each family keeps the ModelUnderTest contract (hibug_core.models.adapter): a classifier comes as a
ModelAdapter, a model of objects as an ObjectModelAdapter."""
from __future__ import annotations

import importlib
from pathlib import Path

from hibug_core.cache import process_cache
from hibug_core.errors import ModelLoadError
from hibug_core.models.adapter import ModelAdapter
from hibug_core.registry import Registry, UnknownChoice

MODELS = Registry("model")
CLASSES_FILE = "classes.txt"  # beside a plain state dict: the class names, one per line, in output order


def read_checkpoint(path: str, spec: str) -> tuple[dict, list[str], dict]:
    """(state dict, class names, extra entries) of a checkpoint file: hibug's own ({"state_dict", "classes", ...}),
    or a plain state dict with the class names in <checkpoint>.classes.txt or classes.txt beside it."""
    from hibug_core.models.torch_files import load_tensors

    file = Path(path).expanduser()
    if not file.is_file():
        raise ModelLoadError(f"{spec}: no checkpoint file {file}")
    try:
        stored = load_tensors(file)
    except ModelLoadError as error:
        raise ModelLoadError(f"{spec}: {error}") from None
    if not isinstance(stored, dict):
        raise ModelLoadError(f"{spec}: {file} holds a {type(stored).__name__}, not a state dict")
    if "state_dict" in stored:
        state, classes = stored["state_dict"], list(stored.get("classes") or [])
        extra = {k: v for k, v in stored.items() if k not in ("state_dict", "classes")}
    else:
        state, classes, extra = stored, [], {}
    if not classes:
        for sidecar in (file.with_name(file.name + ".classes.txt"), file.with_name(CLASSES_FILE)):
            if sidecar.is_file():
                classes = [line.strip() for line in sidecar.read_text(encoding="utf-8").splitlines() if line.strip()]
                break
    if not classes:
        raise ModelLoadError(f"{spec}: no class names for {file}; save the checkpoint as {{'state_dict': ..., "
                             f"'classes': [...]}} or write them, one per line in output order, "
                             f"to {file.name}.classes.txt")
    return state, classes, extra


def _load_state(network, state: dict, spec: str) -> None:
    try:
        network.load_state_dict(state)
    except RuntimeError as error:
        first = str(error).splitlines()[0][:240]
        raise ModelLoadError(f"{spec}: the checkpoint does not fit this architecture ({first}); check the "
                             "architecture name and the number of classes") from None


@MODELS.register("timm", "a timm architecture with your weights, e.g. timm:resnet50:/models/birds.pth "
                 "(preprocessing from timm's data config)", form="timm:<architecture>:<checkpoint path>")
def _timm(argument: str, *, spec: str, device: str | None) -> ModelAdapter:
    import timm
    from timm.data import create_transform, resolve_data_config

    architecture, _, checkpoint = argument.partition(":")
    state, classes, _ = read_checkpoint(checkpoint, spec)
    try:
        network = timm.create_model(architecture, pretrained=False, num_classes=len(classes))
    except RuntimeError as error:  # timm's "Unknown model"
        raise ModelLoadError(f"{spec}: {error}") from None
    _load_state(network, state, spec)
    config = resolve_data_config({}, model=network)
    return ModelAdapter(spec, network, create_transform(**config), classes, input_size=config["input_size"][-1],
                        device=device)


@MODELS.register("torchvision", "a torchvision architecture with your weights, e.g. "
                 "torchvision:resnet50:/models/birds.pth (preprocessing: the architecture's own weight transforms)",
                 form="torchvision:<architecture>:<checkpoint path>")
def _torchvision(argument: str, *, spec: str, device: str | None) -> ModelAdapter:
    from torchvision import models

    architecture, _, checkpoint = argument.partition(":")
    state, classes, _ = read_checkpoint(checkpoint, spec)
    if architecture not in models.list_models():
        raise ModelLoadError(f"{spec}: torchvision has no architecture '{architecture}'")
    network = models.get_model(architecture, weights=None, num_classes=len(classes))
    _load_state(network, state, spec)
    transform = models.get_model_weights(architecture).DEFAULT.transforms()  # code only: nothing is downloaded
    return ModelAdapter(spec, network, transform, classes, input_size=transform.crop_size[0], device=device)


class ImageProcessorTransform:
    """A transformers image processor as a picklable PIL image -> tensor transform."""

    def __init__(self, processor):
        self.processor = processor

    def __call__(self, image):
        return self.processor(images=image, return_tensors="pt")["pixel_values"][0]


@MODELS.register("transformers", "an AutoModelForImageClassification from a folder or the hub cache, e.g. "
                 "transformers:/models/vit-birds (its image processor, class names from its config)",
                 form="transformers:<hub id or folder>")
def _transformers(argument: str, *, spec: str, device: str | None) -> ModelAdapter:
    from transformers import AutoImageProcessor, AutoModelForImageClassification

    from hibug_core.embeddings.hub import offline_unless_reachable

    source = str(Path(argument).expanduser()) if Path(argument).expanduser().exists() else argument
    try:
        with offline_unless_reachable():
            network = AutoModelForImageClassification.from_pretrained(source)
            processor = AutoImageProcessor.from_pretrained(source)
    except (OSError, ValueError) as error:
        raise ModelLoadError(f"{spec}: cannot load it ({str(error).splitlines()[0][:200]}); offline, give a folder "
                             "saved with save_pretrained, or a hub id already in the Hugging Face cache") from None
    labels = network.config.id2label
    classes = [labels[i] for i in range(len(labels))]
    size = getattr(processor, "crop_size", None) or processor.size
    return ModelAdapter(spec, network, ImageProcessorTransform(processor), classes,
                        input_size=int(size.get("height") or size.get("shortest_edge") or 224), device=device)


@MODELS.register("shape-cnn", "the zoo's small shape CNN (the classification demo's model) with its weights, e.g. "
                 "shape-cnn:models/shape-cnn.pt", form="shape-cnn:<checkpoint path>")
def _shape_cnn(argument: str, *, spec: str, device: str | None) -> ModelAdapter:
    from hibug_core.models.zoo.shape_cnn import shape_cnn_parts

    state, classes, extra = read_checkpoint(argument, spec)
    try:
        network, transform, recipe = shape_cnn_parts(state, classes, extra)
    except RuntimeError as error:
        raise ModelLoadError(f"{spec}: not a shape-cnn checkpoint ({str(error).splitlines()[0][:200]})") from None
    return ModelAdapter(spec, network, transform, classes, input_size=64, device=device, recipe=recipe)


def _zoo_object_model(adapter: str):
    """The constructor of a zoo family of object models: its adapter (hibug_core.models.object_models) on a
    checkpoint file."""
    def build(argument: str, *, spec: str, device: str | None):
        from hibug_core.models import object_models

        checkpoint = Path(argument).expanduser()
        if not checkpoint.is_file():
            raise ModelLoadError(f"{spec}: no checkpoint file {checkpoint}")
        return getattr(object_models, adapter)(spec, checkpoint)
    return build


MODELS.add("scene-fcos", "the zoo's scene detector: torchvision's FCOS on a small CNN backbone (the detection demo's "
           "model), e.g. scene-fcos:models/shape-fcos.pt", _zoo_object_model("SceneFcos"),
           form="scene-fcos:<checkpoint path>")
MODELS.add("scene-keypoints", "the zoo's keypoint model: torchvision's Keypoint R-CNN on a small CNN backbone, e.g. "
           "scene-keypoints:models/people.pt", _zoo_object_model("SceneKeypoints"),
           form="scene-keypoints:<checkpoint path>")
MODELS.add("scene-masks", "the zoo's mask model: torchvision's Mask R-CNN on a small CNN backbone (the segmentation "
           "demo's model), e.g. scene-masks:models/shape-masks.pt", _zoo_object_model("SceneMasks"),
           form="scene-masks:<checkpoint path>")


@MODELS.register("python", "your own code: python:<module>:<function> returns a ModelAdapter, or (network, "
                 "transform, class names)", form="python:<module>:<function>", runs_code=True)
def _python(argument: str, *, spec: str, device: str | None) -> ModelAdapter:
    module_name, _, function_name = argument.rpartition(":")
    try:
        function = getattr(importlib.import_module(module_name), function_name)
    except (ImportError, AttributeError, ValueError) as error:
        raise ModelLoadError(f"{spec}: cannot import {function_name} from {module_name or '(no module)'} "
                             f"({error})") from None
    made = function()
    if isinstance(made, ModelAdapter):
        return made
    try:
        network, transform, classes = made
    except (TypeError, ValueError):
        raise ModelLoadError(f"{spec}: {function_name}() must return a ModelAdapter or (network, transform, class "
                             f"names), not {type(made).__name__}") from None
    return ModelAdapter(spec, network, transform, list(classes), device=device)


def load_model(spec: str, device: str | None = None, *, root: Path | None = None) -> ModelAdapter:
    """The adapted model named by `spec`, loaded once per process (a clear error for unknown specs and files).
    Relative file paths in the spec are read under `root` when they exist there (a project keeps its own networks
    under models/, so the project folder can move); the adapter keeps the spec as written."""
    spec = spec.strip()
    try:
        MODELS.get(spec)
    except UnknownChoice as error:
        raise ModelLoadError(str(error)) from None
    located = _located(spec, root)
    return _loaded(spec, located, device, _files_stamp(located))


def _located(spec: str, root: Path | None) -> str:
    if root is None:
        return spec
    parts = spec.split(":")
    return ":".join([parts[0]] + [str(Path(root) / p) if p and not Path(p).expanduser().is_absolute()
                                  and (Path(root) / p).exists() else p for p in parts[1:]])


def absolute_spec(spec: str, root: Path | None = None) -> str:
    """The spec with every file it names as an absolute path (under `root` where it is there, else from the current
    folder), for a process that starts elsewhere (a Ray worker)."""
    located = _located(spec.strip(), root).split(":")
    return ":".join([located[0]] + [str(Path(p).expanduser().resolve()) if p and Path(p).expanduser().exists() else p
                                    for p in located[1:]])


def _files_stamp(spec: str) -> tuple:
    """Size and time of the files a spec names, so a checkpoint rewritten in place is loaded again."""
    stamps = []
    for part in spec.split(":")[1:]:
        path = Path(part).expanduser()
        if path.exists():
            stat = path.stat()
            stamps.append((str(path), stat.st_size, stat.st_mtime_ns))
    return tuple(stamps)


@process_cache("models", max_items=2)
def _loaded(spec: str, located: str, device: str | None, stamp: tuple) -> ModelAdapter:
    return MODELS.build(located, spec=spec, device=device)
