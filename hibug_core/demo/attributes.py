"""The demo's attribute schema: the shape world's own attributes (with ground truth) plus the measured ones."""
from __future__ import annotations

from hibug_core.attributes.measured import measured_attributes
from hibug_core.attributes.schema import Attribute, AttributeSchema
from hibug_core.demo.easyvqa import COLORS, SHAPES

TASK = "classify the shape (circle, rectangle or triangle) in small synthetic drawings"


def demo_attribute_schema() -> AttributeSchema:
    shape_world = [
        Attribute(name="shape", tags=SHAPES, templates=("a drawing of a {tag}", "a {tag} shape", "a simple {tag}")),
        Attribute(name="color", tags=COLORS, templates=("a {tag} {label}", "a drawing of a {tag} shape",
                                                         "a {label} colored {tag}")),
        Attribute(name="size", tags=("small", "medium", "large"),
                  templates=("a {tag} {label}", "a drawing of a {tag} shape")),
        Attribute(name="horizontal position", tags=("left", "center", "right"),
                  templates=("a {label} on the {tag} of the image", "a {label} at the {tag}")),
        Attribute(name="vertical position", tags=("top", "middle", "bottom"),
                  templates=("a {label} at the {tag} of the image", "a {label} near the {tag}")),
    ]
    return AttributeSchema(attributes=(*shape_world, *measured_attributes()), task=TASK)
