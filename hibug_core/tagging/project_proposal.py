"""A proposal of attributes for a project: from a language model told the task's focus, HiBug2's comparison of the
model's right and wrong predictions, or the built-in library."""
from __future__ import annotations

from hibug_core.objects.coco import RESERVED_NAMES
from hibug_core.tagging.propose import ProposalError, ProposalResult, propose_with_llm
from hibug_core.tagging.suggest import propose_by_comparison


def propose_for_project(project, op, *, task, model: str | None = None, api_key: str | None = None
                        ) -> ProposalResult:
    """A proposal for a project (a ProposeAttributes operation) of `task` (its Task: hibug_core.tasks.task_of): the
    language model's, told the task's focus, or the built-in library's entry (the task's own, else chosen from the
    words and the model's classes unless named) plus the measured attributes. Nothing is stored; the caller saves it
    as a version."""
    from hibug_core.attributes.library import choose_task_type, library_schema

    models = project.models()
    model = model or (models[0] if models else None)
    if op.llm and op.method == "comparative":
        if model is None:
            raise ProposalError("the comparative method compares a model's right and wrong predictions: import a "
                                "model's outputs first")
        config = op.llm_config()
        result = propose_by_comparison(project, model, config, api_key=api_key, outlined=task.views.outlined)
        result.source = f"{config.model} (comparative flow, pairs of {model}'s right and wrong {task.nouns.samples})"
        return result
    classes = (project.model_classes(model) if model else None) or []
    if not classes:  # imported outputs that name no class list: the classes the labels use
        classes = sorted(set(project.samples()["label"].dropna()) - set(RESERVED_NAMES))
    words = (op.task or "").strip() or project.name
    if op.llm:
        config = op.llm_config()
        result = propose_with_llm(words, classes, config, method=op.method, focus=task.focus, api_key=api_key)
        result.source = f"{config.model} ({op.method} flow{f', {task.name}' if task.library else ''})"
        return result
    kind = op.library or task.library or choose_task_type(words, classes)
    return ProposalResult(library_schema(words, classes, kind), [], "library",
                          f"the built-in '{kind}' library (no language model)")
