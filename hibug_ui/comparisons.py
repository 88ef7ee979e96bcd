"""A big project's first comparison of two models made by a background job (kept in the project's files, which the
Compare page then reads), never in a page's run: at ten million objects it takes most of a minute."""
from __future__ import annotations

from hibug_core.operations import CompareModels
from hibug_ui.jobs import job_status, latest_job, start_job
from hibug_ui.visitor import may_edit

IN_BACKGROUND_FROM = 500_000  # samples of the compared split from which a first comparison is made by a job


def needs_job(project, op: CompareModels) -> bool:
    """Whether this comparison is for a job to make: a big split, not kept yet, and a visitor who may start jobs (one
    who may not sees it made in the page, as a small project's is)."""
    return (may_edit(project) and project.split_counts().get(op.split, 0) >= IN_BACKGROUND_FROM
            and not op.is_kept(project, op.models))


def compare_in_background(project, op: CompareModels, user: str, *, key: str) -> None:
    """Start the job that makes this comparison, unless one is making it (or stopped making it: its panel offers to
    resume it), and show its progress; the page reruns when it ends and reads what it kept. One that finished made it
    for an earlier state of the project (else it would be kept): it is made again."""
    job = latest_job(project, CompareModels.kind)
    if job is None or job.params != op.params() or job.status == "done":
        start_job(project, op, user)
    job_status(project, CompareModels.kind, user, key=key)


def compare_ahead(project, user: str) -> int | None:
    """After a model is added: the comparison the Compare page opens on (its first two models, every setting at its
    default), started as a job where it is for one (needs_job); its id, or None."""
    models = project.models()
    if len(models) < 2:
        return None
    op = CompareModels.build({"models": models[:2]})
    return start_job(project, op, user) if needs_job(project, op) else None


__all__ = ["IN_BACKGROUND_FROM", "compare_ahead", "compare_in_background", "needs_job"]
