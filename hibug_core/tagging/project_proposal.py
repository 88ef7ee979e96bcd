"""A proposal of attributes for a project: from a language model told the task's focus, HiBug2's comparison of the
model's right and wrong predictions, or the built-in library."""
from __future__ import annotations

from hibug_core.objects.coco import RESERVED_NAMES
from hibug_core.registry import Registry
from hibug_core.tagging.propose import ProposalError, ProposalResult, propose_with_llm
from hibug_core.tagging.suggest import propose_by_comparison

PROPOSAL_METHODS = Registry("language model's flow")  # each: (project, *, words, classes, config, task, model,
# api_key) -> a ProposalResult whose source says who proposed it


def _from_words(method: str):
    def propose(project, *, words, classes, config, task, model, api_key) -> ProposalResult:
        result = propose_with_llm(words, classes, config, method=method, focus=task.focus, api_key=api_key)
        result.source = f"{config.model} ({method} flow{f', {task.name}' if task.library else ''})"
        return result
    return propose


PROPOSAL_METHODS.add("hibug2", "HiBug2's, from the task's words: three groups, yes/no attributes named 'is ...', "
                     "'not visible' where needed", _from_words("hibug2"))
PROPOSAL_METHODS.add("hibug", "HiBug's, from the task's words", _from_words("hibug"))


@PROPOSAL_METHODS.register("comparative", "HiBug2's comparative one: a multimodal model shown pairs of a right and a "
                           "wrong prediction of one class")
def _comparative(project, *, words, classes, config, task, model, api_key) -> ProposalResult:
    if model is None:
        raise ProposalError("the comparative method compares a model's right and wrong predictions: import a "
                            "model's outputs first")
    result = propose_by_comparison(project, model, config, api_key=api_key, outlined=task.views.outlined)
    result.source = f"{config.model} (comparative flow, pairs of {model}'s right and wrong {task.nouns.samples})"
    return result


def propose_for_project(project, op, *, task, model: str | None = None, api_key: str | None = None
                        ) -> ProposalResult:
    """A proposal for a project (a ProposeAttributes operation) of `task` (its Task: hibug_core.tasks.task_of): the
    language model's by the operation's flow (PROPOSAL_METHODS), or the built-in library's entry (the task's own, else
    chosen from the words and the model's classes unless named) plus the measured attributes. Nothing is stored; the
    caller saves it as a version."""
    from hibug_core.attributes.library import chosen_entry, library_schema

    models = project.models()
    model = model or (models[0] if models else None)
    classes = (project.model_classes(model) if model else None) or []
    if not classes:  # imported outputs that name no class list: the classes the labels use
        classes = sorted(set(project.samples()["label"].dropna()) - set(RESERVED_NAMES))
    words = (op.purpose or "").strip() or project.name
    if op.llm:
        return PROPOSAL_METHODS.build(op.method, project=project, words=words, classes=classes,
                                      config=op.llm_config(), task=task, model=model, api_key=api_key)
    if op.library or task.library:
        kind, why = op.library or task.library, "chosen" if op.library else f"the {task.name} task's own"
    else:
        kind, why = chosen_entry(words, classes)
    return ProposalResult(library_schema(words, classes, kind), [], "library",
                          f"the built-in '{kind}' library (no language model): {why}")
