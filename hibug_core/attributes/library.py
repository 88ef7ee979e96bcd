"""The built-in attribute library: structured attributes for common task types, used when no language model is
configured (clearly labelled: source "library")."""
from __future__ import annotations

import re
from dataclasses import dataclass

from hibug_core.attributes.schema import NOT_VISIBLE, Attribute, AttributeSchema
from hibug_core.registry import Registry

DEFAULT_ENTRY = "objects"  # when no entry's words are in the task description
COLOURS = ("red", "orange", "yellow", "green", "blue", "purple", "pink", "brown", "black", "white", "gray")


def _a(name, tags, group="main object", **extra) -> Attribute:
    kind = "binary" if name.startswith("is ") else "descriptive"
    return Attribute(name=name, tags=tuple(tags), group=group, kind=kind, source="library", **extra)


def _yes_no(name, group="main object", visible=False) -> Attribute:
    return _a(name, ("yes", "no", NOT_VISIBLE) if visible else ("yes", "no"), group)


SCENE = _a("background", ("plain", "indoor", "urban", "nature", "water", "sky", "snow"), "background",
           templates=("a photo of a {label} in front of a {tag} background", "a {label}, {tag} background"))
CLUTTER = _yes_no("is the background cluttered", "background")
STYLE = _a("image style", ("photo", "drawing", "painting", "3d render"), "global",
           templates=("a {tag} of a {label}",))

@dataclass(frozen=True)
class LibraryEntry:
    """One entry of the built-in library: its attributes, and the words of a task description that choose it."""

    attributes: tuple[Attribute, ...]
    keywords: tuple[str, ...] = ()
    decisive: bool = False  # a kind of task (pose, detection): its words decide before any domain's are counted


LIBRARY = Registry("attribute library entry")  # each builds its LibraryEntry


def _entry(name: str, help: str, attributes: tuple[Attribute, ...], keywords: tuple[str, ...] = (),
           decisive: bool = False) -> None:
    entry = LibraryEntry(attributes, keywords, decisive)
    LIBRARY.add(name, help, lambda: entry)

# The kinds of task first (pose before detection: a keypoint detector is described with both's words).
_entry("pose", "pose estimation: pose, viewpoint, occlusion of people", (
    _a("body pose", ("standing", "sitting", "lying", "walking", "running", "jumping"),
       templates=("a photo of a {tag} {label}",)),
    _yes_no("is occluded"),
    _yes_no("is truncated by the image border"),
    _yes_no("is in a crowd"),
    _a("viewpoint", ("front", "side", "back"), templates=("a {label} seen from the {tag}",)),
    _a("clothing", ("short sleeves", "long sleeves", "coat", "swimwear"),
       templates=("a photo of a {label} wearing {tag}",)),
    _a("person size", ("small", "medium", "large"), templates=("a {tag} {label} in the image",)),
    _a("scene", ("indoor", "street", "sports field", "nature"), "background",
       templates=("a photo of a {label} in a {tag} scene",)),
    STYLE,
), ("pose", "keypoint", "skeleton", "joint"), decisive=True)

_entry("detection", "object detection: size, truncation, occlusion, crowding", (
    _a("object size", ("small", "medium", "large"), templates=("a {tag} {label}",)),
    _yes_no("is occluded"),
    _yes_no("is truncated by the image border"),
    _yes_no("is in a crowd of similar objects"),
    _a("viewpoint", ("front", "side", "back", "top"), templates=("a {label} seen from the {tag}",)),
    _a("scene", ("indoor", "street", "nature", "water", "sky"), "background",
       templates=("a {label} in a {tag} scene",)),
    _a("time of day", ("day", "night"), "global", templates=("a photo of a {label} at {tag}",)),
    STYLE,
), ("detect", "detection", "bounding box", "boxes", "localize"), decisive=True)

_entry("objects", "generic objects (the default)", (
    _a("color", COLOURS, templates=("a {tag} {label}", "a photo of a {tag} {label}")),
    _a("size", ("small", "medium", "large"),
       templates=("a {tag} {label} in the image", "a photo of a {tag} {label}")),
    _a("position", ("left", "center", "right"), templates=("a {label} on the {tag} of the image",)),
    _a("viewpoint", ("front", "side", "back", "top"), templates=("a {label} seen from the {tag}",)),
    _a("texture", ("plain", "striped", "spotted", "patterned"), templates=("a {tag} {label}",)),
    _yes_no("is partially occluded"),
    SCENE, CLUTTER, STYLE,
), ())

_entry("animals", "animals", (
    _a("fur color", ("black", "white", "brown", "gray", "orange", "golden", "spotted", "striped", "mixed"),
       templates=("a photo of a {label} with {tag} fur",)),
    _a("pose", ("standing", "sitting", "lying", "running", "flying", "swimming"),
       templates=("a photo of a {tag} {label}",)),
    _a("age", ("young", "adult"), templates=("a photo of a {tag} {label}",)),
    _a("size", ("small", "medium", "large"), templates=("a {tag} {label} in the image",)),
    _yes_no("is facing the camera"),
    _a("habitat", ("grass", "forest", "water", "snow", "sand", "indoor", "urban"), "background",
       templates=("a photo of a {label} in {tag}", "a {label} on {tag}")),
    CLUTTER, STYLE,
), ("animal", "cat", "dog", "bird", "horse", "cow", "sheep", "fish", "wildlife", "species", "pet"))

_entry("people", "people and faces", (
    _a("hair color", ("black", "brown", "blond", "red", "gray", "white", NOT_VISIBLE),
       templates=("a photo of a {label} with {tag} hair",)),
    _yes_no("is wearing glasses", visible=True),
    _yes_no("is wearing a hat"),
    _yes_no("is smiling", visible=True),
    _yes_no("is bearded", visible=True),
    _a("age", ("child", "young adult", "middle-aged", "elderly"), templates=("a photo of a {tag} {label}",)),
    _a("head pose", ("frontal", "turned", "profile"), templates=("a {tag} photo of a {label}'s face",)),
    _a("background", ("plain", "indoor", "outdoor", "crowd"), "background",
       templates=("a photo of a {label} with a {tag} background",)),
    STYLE,
), ("face", "faces", "person", "people", "celebrity", "portrait", "human", "identity", "smile"))

_entry("vehicles", "vehicles", (
    _a("color", COLOURS, templates=("a {tag} {label}",)),
    _a("viewpoint", ("front", "side", "rear", "top"), templates=("a {label} seen from the {tag}",)),
    _a("size", ("small", "medium", "large"), templates=("a {tag} {label} in the image",)),
    _yes_no("is partially occluded"),
    _a("road scene", ("highway", "city street", "parking lot", "countryside", "garage"), "background",
       templates=("a photo of a {label} on a {tag}", "a {label} in a {tag}")),
    _a("weather", ("clear", "rain", "snow", "fog"), "global", templates=("a photo of a {label} in {tag} weather",)),
    _a("time of day", ("day", "night", "dusk"), "global", templates=("a photo of a {label} at {tag}",)),
    STYLE,
), ("car", "cars", "vehicle", "truck", "bus", "motorcycle", "bicycle", "traffic"))



def choose_task_type(task: str, classes: list[str] | None = None) -> str:
    """The library entry chosen for a task (chosen_entry's, without its reason)."""
    return chosen_entry(task, classes)[0]


def chosen_entry(task: str, classes: list[str] | None = None) -> tuple[str, str]:
    """(the library entry, why) for a task: pose or detection when the task says so (the kind of task decides), else
    the one domain the task description and class names speak of, when they speak of no other; generic objects when
    none fits, or several do (a task of people, objects, textures and documents is no task of animals)."""
    words = set(re.findall(r"[a-z]+", " ".join([task, *(classes or [])]).lower()))
    text = " ".join(sorted(words))
    entries = {e.name: e.build() for e in LIBRARY}
    for kind, entry in entries.items():
        said = [k for k in entry.keywords if k in text]
        if entry.decisive and said:
            return kind, f"the task speaks of {', '.join(said[:3])}"
    matched = {kind: [k for k in entry.keywords if k in words] for kind, entry in entries.items() if entry.keywords}
    matched = {kind: said for kind, said in matched.items() if said}
    if len(matched) == 1:
        kind, said = next(iter(matched.items()))
        return kind, f"the task and its classes speak of {kind} ({', '.join(said[:3])}) and of no other domain"
    if matched:
        named = "; ".join(f"{kind} ({', '.join(said[:2])})" for kind, said in sorted(matched.items()))
        return DEFAULT_ENTRY, f"the task speaks of several domains ({named}), so the generic attributes"
    return DEFAULT_ENTRY, "no domain of the library fits the task's words, so the generic attributes"


def library_schema(task: str, classes: list[str] | None = None, task_type: str | None = None, *,
                   with_measured: bool = True) -> AttributeSchema:
    """A structured schema from the built-in library for the task (plus the measured global attributes)."""
    from hibug_core.attributes.measured import measured_attributes

    kind = task_type or choose_task_type(task, classes)
    if kind not in LIBRARY:
        raise KeyError(f"no library entry '{kind}'; choose one of {', '.join(LIBRARY.names())}")
    attributes = list(LIBRARY.get(kind).build().attributes) + (measured_attributes() if with_measured else [])
    return AttributeSchema(attributes=tuple(attributes), task=task)
