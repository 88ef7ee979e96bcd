"""Attributes and their tags: the structured schema (HiBug2) and its versioned storage."""
from hibug_core.attributes.schema import GROUPS, NOT_VISIBLE, Attribute, AttributeSchema

__all__ = ["GROUPS", "NOT_VISIBLE", "Attribute", "AttributeSchema"]
