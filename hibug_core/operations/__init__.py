"""Every operation hibug runs (embed, tag, teach, map, predict, propose, suggest tags, find slices, predict unseen
slices, compare, check, select, repair, generate, failure search, report): one typed definition each, with its
defaults, allowed choices (from the registries), bounds (from the core's configs) and its own run. The CLI's options,
the pages' forms and the background jobs are built from these, so they cannot drift."""
from __future__ import annotations

from hibug_core.operations.attributes import ProposeAttributes, SuggestTags
from hibug_core.operations.base import (
    NO_BASELINE,
    Cli,
    LLMSettings,
    OneOf,
    Operation,
    OperationError,
    RaySettings,
    Result,
)
from hibug_core.operations.embedding import Embed, EmbeddingMap, Predict, Tag, Teach
from hibug_core.operations.repair import FailureSearch, Generate, Repair, Select
from hibug_core.operations.slices import Check, CompareModels, FindSlices, PredictUnseen, Report

OPERATIONS: dict[str, type[Operation]] = {op.kind: op for op in (
    Embed, Tag, Teach, EmbeddingMap, Predict, ProposeAttributes, SuggestTags, FindSlices, PredictUnseen, CompareModels,
    Check, Select, Repair, Generate, FailureSearch, Report)}


def register_operation(op: type[Operation]) -> type[Operation]:
    """Add an operation defined elsewhere (an extension's, in a module named by HIBUG_JOB_MODULES); a kind names one
    operation only. Usable as a class decorator."""
    if OPERATIONS.get(op.kind, op) is not op:
        raise ValueError(f"operation kind '{op.kind}' is defined twice")
    OPERATIONS[op.kind] = op
    return op


def operation(kind: str) -> type[Operation]:
    if kind not in OPERATIONS:
        raise OperationError(f"unknown operation '{kind}'; known: {', '.join(OPERATIONS)}")
    return OPERATIONS[kind]


def background_kinds() -> list[str]:
    """The kinds the dashboard runs as background jobs: the long operations (Operation.background)."""
    return [kind for kind, op in OPERATIONS.items() if op.background]


__all__ = ["NO_BASELINE", "OPERATIONS", "Check", "Cli", "CompareModels", "Embed", "EmbeddingMap", "FailureSearch",
           "FindSlices", "Generate", "LLMSettings", "OneOf", "Operation", "OperationError", "Predict", "PredictUnseen",
           "ProposeAttributes", "RaySettings", "Repair", "Report", "Result", "Select", "SuggestTags", "Tag", "Teach",
           "background_kinds", "operation", "register_operation"]
