"""The tools hibug serves to assistants, each a declaration over an operation or a read view the CLI and the pages
use: its arguments (an operation's fields keep their types, bounds, choices and defaults), whether it changes
anything, and its answer."""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import pandas as pd
from pydantic import Field, TypeAdapter, WithJsonSchema
from pydantic_core import PydanticUndefined

from hibug_core.assistants.answers import Answer, page, picture, records
from hibug_core.cache import BoundedCache
from hibug_core.errors import HibugError
from hibug_core.operations import CompareModels, FindSlices, Operation, Select
from hibug_core.review.board import STATUSES

PAGE = 10
REPORTS = BoundedCache("assistants' slice reports", max_items=8)


@dataclass(frozen=True)
class Argument:
    name: str
    annotation: Any
    default: Any = PydanticUndefined  # none: required
    description: str = ""

    @property
    def required(self) -> bool:
        return self.default is PydanticUndefined

    def annotated(self):
        return Annotated[(self.annotation, Field(description=self.description))] if self.description else \
            self.annotation


def _short(text: str) -> str:
    """An operation field's help cut to its first clause, without a closing remark in brackets (tool schemas must
    stay small)."""
    return re.sub(r"\s*\([^()]*\)$", "", text).split(": ")[0].split("; ")[0].strip()


def taken(op: type[Operation], *names: str, **described: str) -> tuple[Argument, ...]:
    """Arguments from an operation's fields: its types, bounds, choices and defaults, the operation checking them all
    again with its own words when it is built."""
    arguments = []
    for name in names:
        field = op.model_fields[name]
        typed = Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation
        # The schema says the field's type and bounds; the value is checked once, by the operation, in its words.
        annotation = Annotated[Any, WithJsonSchema(TypeAdapter(typed).json_schema())]
        rule = op.rule(name)
        words = described.get(name) or _short(field.description or name)
        if rule is not None and len(rule.names()) <= 8:
            words += " (" + ", ".join(rule.names()) + ")"
        arguments.append(Argument(name, annotation, field.get_default(call_default_factory=True)
                                  if not field.is_required() else PydanticUndefined, words))
    return tuple(arguments)


PROJECT = Argument("project", str | None, None, "from list_projects (optional when one is served)")
CURSOR = Argument("cursor", str | None, None, "next_cursor of the last page")
SIZE = Argument("page_size", int, PAGE, "rows per page")
SLICE = Argument("slice", str, description="slice id or description, e.g. 'color = blue & size = small'")
MODEL_SPLIT = taken(FindSlices, "model", "split")


@dataclass(frozen=True)
class Call:
    """One tool call: the project it names (opened for it), what is served, and who calls."""

    project: Any
    served: Any
    identity: str | None


@dataclass(frozen=True)
class AssistantTool:
    name: str
    title: str
    description: str
    arguments: tuple[Argument, ...]
    answer: Callable[..., Answer]
    read_only: bool = True
    needs_project: bool = True


# ----- reading one project -----------------------------------------------------------------------------------------
def _nouns(project):
    from hibug_core.tasks import task_of

    return task_of(project).nouns


def _search(call: Call, **fields) -> FindSlices:
    """FindSlices with these fields (the defaults for those not given), checked against the project's task."""
    from hibug_core.tasks import task_of

    op = FindSlices.build({k: v for k, v in fields.items() if v is not None})
    op.check_task(task_of(call.project))
    return op


def _report(call: Call, op: FindSlices | None = None, **fields):
    """The error slices of FindSlices (`op`, else one with these fields): the Error slices page's and `hibug slices`'
    report."""
    from hibug_core.store.tag_store import project_state

    op = op or _search(call, **fields)
    # kept for the next question while the project is as it was (a read-only project keeps no report in its files)
    key = (str(call.project.folder), project_state(call.project), op.model_dump_json())
    return REPORTS.get_or_make(key, lambda: op.report(call.project))


def _samples(call: Call, report, ids=None) -> pd.DataFrame:
    """The task's sample table of the report's model (an object's box and outcome too), with each evaluated sample's
    error; only `ids` when given."""
    from hibug_core.tasks import task_of

    table = task_of(call.project).sample_table(call.project, report.model)
    table = table if ids is None else table.loc[ids]
    return table.join(report.evaluation[["error"]])


def _definition(report, ref: str):
    """A slice named by an assistant: its rank in the report ("1"), its id, or its description."""
    text = str(ref).strip()
    if text.isdigit():
        if not 1 <= int(text) <= len(report.slices):
            raise HibugError(f"slice {text}: the report ranks {len(report.slices)} error slices; give a rank among "
                             "them, a slice id or a description such as 'color = blue & size = small'")
        return tuple(report.slices["definition"].iloc[int(text) - 1])
    # the tags as the project spells them, whatever the case typed; a reported slice in any order of its conditions
    known = {a.casefold(): (a, {str(t).casefold(): t for t in tags})
             for a, tags in zip(report.tags.attributes, report.tags.tags)}
    typed = []
    for attribute, tag in report.definition(text):
        if str(attribute).casefold() not in known:
            raise HibugError(f"no attribute '{attribute}' is sliced here; the attributes: "
                             + ", ".join(a for a, _ in known.values()))
        name, tags = known[str(attribute).casefold()]
        if str(tag).casefold() not in tags:
            raise HibugError(f"'{name}' has no tag '{tag}' here; its tags: " + ", ".join(map(str, tags.values())))
        typed.append((name, tags[str(tag).casefold()]))
    wanted = frozenset(typed)
    reported = next((d for d in report.slices["definition"] if frozenset(map(tuple, d)) == wanted), None)
    return tuple(map(tuple, reported)) if reported is not None else tuple(typed)


def _slice_rows(report) -> pd.DataFrame:
    table = report.exported().reset_index()
    keep = ["rank", "slice_id", "description", "count", "failures", "score", "score_low", "score_high", "q_value",
            "bug_type", "reason", "train_count", "tag_precision", "trusted", "repeats"]
    return table[[c for c in keep if c in table]]


def _coco(summary: dict, nouns) -> dict:
    """COCO's figures in the task's words ("mask AP50"); COCO's -1 (nothing of that kind to find) as null."""
    return {(f"{nouns.ap}{name[2:]}" if name.startswith("AP") else name): None if value < 0 else value
            for name, value in summary.items()}


def list_projects(call: Call, cursor: str | None = None, page_size: int = 20) -> Answer:
    names = call.served.project_names()
    listed = page([{"project": name} for name in names], cursor, page_size)
    for row in listed["rows"]:
        with call.served.open(row["project"]) as project:
            described = project.describe()
            row.update(task=described["task"], samples=described["splits"], models=described["models"])
    return Answer(listed)


def project_summary(call: Call, project: str | None = None) -> Answer:
    described = call.project.describe()
    nouns = _nouns(call.project)
    scores = [{"model": r["model"], "split": r["split"], "samples": r["n"],
               nouns.figure: None if r["n"] == 0 else r["mean_score"]} for r in described["scores"]]
    coco = {model: _coco(summary, nouns) for model, summary in described.get("coco", {}).items()}
    return Answer({"project": call.project.folder.name, "title": described["name"], "task": described["task"],
                   "measure": nouns.figure,
                   "sample": nouns.sample, "splits": described["splits"], "models": described["models"],
                   "scores": scores, **({"coco": coco} if coco else {})})


def find_error_slices(call: Call, project: str | None = None, cursor: str | None = None, page_size: int = PAGE,
                      **search) -> Answer:
    op = _search(call, **search)
    report = _report(call, op)
    nouns = _nouns(call.project)
    warning = op.tag_warning(call.project, report)
    return Answer({"headline": report.headline(nouns), "model": report.model, "split": report.split,
                   "measure": nouns.figure, "overall_score": report.overall_score,
                   "evaluated": len(report.evaluation), "enumerated": report.enumerated,
                   "error_slices": len(report.slices), "verdict": report.empty_verdict(), "tag_warning": warning,
                   **page(records(_slice_rows(report)), cursor, page_size)})


def _error_mix(task, rows: pd.DataFrame) -> dict:
    """What went wrong with some samples: counts per error type where the task stores them, else the commonest
    (label, prediction) pairs of the failures."""
    from hibug_core.objects.summary import error_breakdown

    if task.error_groups:
        counts = error_breakdown(rows, task.error_types)
        counts = counts[counts.sum(axis=1) > 0]
        return {kind: {c: int(v) for c, v in row.items() if v} for kind, row in counts.iterrows()}
    failed = rows[rows["error"] > 0] if "error" in rows else rows
    pairs = failed.groupby(["label", "prediction"]).size().sort_values(ascending=False).head(5)
    return {f"{label} → {prediction}": int(n) for (label, prediction), n in pairs.items()}


def explain_slice(call: Call, slice: str, project: str | None = None, model: str | None = None,
                  split: str = "val") -> Answer:
    from hibug_core.slices.search import describe
    from hibug_core.tagging.sources import rank_sources
    from hibug_core.tasks import task_of

    report = _report(call, model=model, split=split)
    definition = _definition(report, slice)
    rank = next((i for i, d in enumerate(report.slices["definition"]) if tuple(map(tuple, d)) == definition), None)
    reported = _slice_rows(report).iloc[[rank]] if rank is not None else None
    attributes = sorted({attribute for attribute, _ in definition})
    ranking = rank_sources(call.project, [a for a in attributes if a in report.all_tags.columns])
    trust = [{"attribute": r["attribute"], "source": r["label"], "checked": int(r["checked"]),
              "accuracy": None if pd.isna(r["accuracy"]) else float(r["accuracy"])}
             for _, r in ranking.table[ranking.table["in_force"]].iterrows()]
    members = _samples(call, report, report.sample_ids(definition))
    stats = report.stats(definition)
    return Answer({
        "slice": describe(definition), "model": report.model, "split": report.split, "measure": _nouns(
            call.project).figure, "count": stats["count"], "failures": stats["failures"], "score": stats["score"],
        "overall_score": report.overall_score,
        "reported": records(reported)[0] if reported is not None else None,
        "why_not_reported": None if reported is not None else (
            "not an error slice at the default settings: fewer than the minimum samples, not below the cut, or not "
            "significantly worse than the whole and each parent"),
        "related": records(report.related(definition).head(12)),
        "what_went_wrong": _error_mix(task_of(call.project), members),
        "tags": trust, "poor_tags": {a: why for a, why in report.poor.items() if a in attributes}})


def slice_examples(call: Call, slice: str, project: str | None = None, model: str | None = None,
                   split: str = "val", outcome: str = "wrong", pictures: bool = True, cursor: str | None = None,
                   page_size: int = 6) -> Answer:
    from hibug_core.pictures import sample_picture
    from hibug_core.slices.search import describe
    from hibug_core.tasks import task_of

    if outcome not in ("wrong", "right", "all"):
        raise HibugError(f"outcome = {outcome!r}: use wrong, right or all")
    task = task_of(call.project)
    report = _report(call, model=model, split=split)
    definition = _definition(report, slice)
    rows = _samples(call, report, report.sample_ids(definition))
    if outcome != "all":  # wrong: what the slice's failures count (a found object with a fair IoU is right)
        failed = pd.Series(report.failed(), index=report.evaluation.index).reindex(rows.index)
        rows = rows[failed.to_numpy(bool) == (outcome == "wrong")]
    shown = page([{"sample_id": int(i)} for i in rows.index], cursor, min(page_size, 12))
    limbs = call.project.keypoint_skeleton().get("limbs", ()) if pictures else ()
    images = []
    for item in shown["rows"]:
        row = rows.loc[item["sample_id"]]
        item.update(name=task.nouns.sample_name(row["sample_key"]), outcome=task.outcome(row),
                    score=round(1 - float(row["error"]), 4))
        if pictures:
            try:
                images.append(picture(sample_picture(call.project, row, limbs)))
                item["picture"] = len(images)
            except (OSError, ValueError, HibugError):
                item["picture"] = None  # missing or unreadable: the list goes on
    return Answer({"slice": describe(definition), "model": report.model, "split": report.split, "outcome": outcome,
                   **shown}, images)


def compare_models(call: Call, models: list[str], project: str | None = None, cursor: str | None = None,
                   page_size: int = PAGE, **fields) -> Answer:
    from hibug_core.tasks import task_of

    op = CompareModels.build({"models": models, **{k: v for k, v in fields.items() if v is not None}})
    op.check_task(task_of(call.project))
    comparison = op.comparison(call.project, op.models)
    overall = comparison.overall[[c for c in ("model", "score", "difference", "p_value", "change", "error_slices")
                                  if c in comparison.overall]]
    columns = ["candidate", "change", "description", "count", "baseline_score", "candidate_score", "difference",
               "q_value"]
    changed, counts = [], []
    for candidate in comparison.candidates:  # as `hibug compare` lists them: classes, then slices but repeats
        counts.append({"candidate": candidate, **comparison.change_counts(candidate)})
        changed += records(comparison.changes(candidate)[columns])
    return Answer({"baseline": comparison.baseline, "split": op.split, "shared": comparison.shared,
                   "test": comparison.test, "measure": _nouns(call.project).figure, "overall": records(overall),
                   "slices": counts, **page(changed, cursor, page_size)})


def error_types(call: Call, project: str | None = None, model: str | None = None, split: str = "val") -> Answer:
    from hibug_core.tasks import task_of

    task = task_of(call.project)
    report = _report(call, model=model, split=split)
    table = _samples(call, report)
    rows = table.loc[report.evaluation.index]
    per_class = rows.groupby("label")["error"].agg(["size", "mean"])
    values = {"model": report.model, "split": report.split, "measure": task.nouns.figure,
              "per_class": {str(label): {"samples": int(r["size"]), "score": round(1 - float(r["mean"]), 4)}
                            for label, r in per_class.iterrows()},
              "what_went_wrong": _error_mix(task, table[table["split"] == report.split])}
    evaluation = call.project.object_evaluation(report.model, report.split)
    if evaluation is not None:
        values["coco"] = _coco(evaluation["summary"], task.nouns)
        if evaluation.get("fixes") is not None:
            values["ap_if_fixed"] = records(evaluation["fixes"])
    return Answer(values)


def tag_quality(call: Call, project: str | None = None, cursor: str | None = None, page_size: int = 20) -> Answer:
    from hibug_core.store.attribute_versions import schema_names
    from hibug_core.tagging.sources import rank_sources, trust_message

    ranking = rank_sources(call.project, schema_names(call.project))
    table = ranking.table.rename(columns={"label": "source_name"})
    keep = ["attribute", "source_name", "tagged", "checked", "accuracy", "low", "high", "in_force"]
    return Answer({"warning": trust_message(ranking),
                   **page(records(table[[c for c in keep if c in table]]), cursor, page_size)})


def select_for_repair(call: Call, project: str | None = None, cursor: str | None = None, page_size: int = 20,
                      **fields) -> Answer:
    from hibug_core.tasks import task_of

    op = Select.build({k: v for k, v in fields.items() if v is not None})
    op.check_task(task_of(call.project))
    op.check_data(call.project)
    chosen = op.selection(call.project)
    nouns = _nouns(call.project)
    per_slice = chosen["slice"].fillna("(no slice)").value_counts()
    keys = call.project.samples().reindex(chosen.index)["sample_key"]
    rows = [{"sample_id": int(i), "name": nouns.sample_name(str(keys[i])),
             "slice": r["slice"] if isinstance(r["slice"], str) else None} for i, r in chosen.iterrows()]
    return Answer({"method": op.method, "budget": chosen.attrs.get("budget"), "selected": len(chosen),
                   "per_slice": {str(k): int(v) for k, v in per_slice.items()},
                   "next_step": "start_job with kind 'repair' retrains on them; `hibug select --export F.csv` writes "
                                "the list for labelling", **page(rows, cursor, page_size)})


# ----- jobs ----------------------------------------------------------------------------------------------------------
def start_job(call: Call, kind: str, params: dict | None = None, project: str | None = None) -> Answer:
    from hibug_core.jobs.kinds import job_operation
    from hibug_core.jobs.store import get_job
    from hibug_core.jobs.worker import submit

    op = job_operation(kind).build(params or {})
    job_id = submit(call.project, op, author=call.identity, queue=call.served.queue())
    return Answer({"job": job_id, "status": get_job(call.project, job_id).describe(),
                   "next_step": f"job_status with job {job_id}"})


def job_status(call: Call, project: str | None = None, job: int | None = None, cursor: str | None = None) -> Answer:
    from hibug_core.jobs.store import get_job, jobs

    def said(j) -> dict:
        result = j.result or {}
        return {"job": j.id, "kind": j.kind, "status": j.status, "stage": j.stage, "done": j.done, "total": j.total,
                "author": j.author, "created_at": j.created_at, "finished_at": j.finished_at, "error": j.error,
                "summary": result.get("summary"), "warning": result.get("warning")}

    if job is not None:
        return Answer(said(get_job(call.project, job)))
    return Answer(page([said(j) for j in jobs(call.project)], cursor, PAGE))


# ----- the review board ----------------------------------------------------------------------------------------------
def review_board(call: Call, project: str | None = None, review: int | None = None, status: str | None = None,
                 cursor: str | None = None) -> Answer:
    from hibug_core.review.board import comments, get_review, reviews

    if review is not None:
        found = get_review(call.project, review)
        return Answer({"review": found.id, "title": found.title, "status": found.status, "assignee": found.assignee,
                       "version": found.version, "updated_by": found.updated_by, "updated_at": found.updated_at,
                       **page(records(comments(call.project, review)[["author", "body", "created_at"]]), cursor,
                              20)})
    board = reviews(call.project, status=status)
    keep = ["id", "target_kind", "title", "status", "assignee", "version", "comments", "updated_by", "updated_at"]
    return Answer(page(records(board[keep]), cursor, 20))


def review_slice(call: Call, project: str | None = None, slice: str | None = None,
                 review: int | None = None, comment: str | None = None, status: str | None = None,
                 assignee: str | None = None, version: int | None = None) -> Answer:
    from hibug_core.review.board import add_comment, ensure_review, get_review, update_review

    if (slice is None) == (review is None):
        raise HibugError("name the slice to put on the board, or the review to change (its id): one of them")
    if slice is not None:
        report = _report(call)
        found = ensure_review(call.project, _definition(report, slice), author=call.identity)
    else:
        found = get_review(call.project, review)
    if status is not None or assignee is not None:
        found = update_review(call.project, found.id, version=found.version if version is None else version,
                              status=status, assignee=assignee if assignee is not None else False,
                              author=call.identity)
    if comment:
        add_comment(call.project, found.id, comment, author=call.identity)
    return Answer({"review": found.id, "title": found.title, "status": found.status, "assignee": found.assignee,
                   "version": found.version})


SEARCH = taken(FindSlices, "model", "split", "max_depth", "min_support", "tags", "rank_by", "by_class")
STATUS_WORDS = ", ".join(STATUSES)
TOOLS: tuple[AssistantTool, ...] = (
    AssistantTool("list_projects", "Projects", "The projects this server serves: task, samples per split, models.",
                  (CURSOR,), list_projects, needs_project=False),
    AssistantTool("project_summary", "Project summary",
                  "Counts and each model's score per split in the task's measure (accuracy, mean IoU, mean OKS, "
                  "mean mask IoU); COCO AP for objects. The numbers of `hibug info`.", (PROJECT,), project_summary),
    AssistantTool("find_error_slices", "Error slices",
                  "A model's error slices: tag combinations significantly worse than the whole (Benjamini-Hochberg), "
                  "ranked, with bug type and reason. The report of `hibug slices`.",
                  (PROJECT, *SEARCH, CURSOR, SIZE), find_error_slices),
    AssistantTool("explain_slice", "Explain a slice",
                  "One slice: size, score, bug type and evidence, parents and children, what went wrong (error "
                  "types or confusions), how trustworthy its tags are.", (PROJECT, SLICE, *MODEL_SPLIT),
                  explain_slice),
    AssistantTool("slice_examples", "Slice examples",
                  "A page of a slice's samples (failures first): names, outcome, score, and pictures.",
                  (PROJECT, SLICE, *MODEL_SPLIT, Argument("outcome", str, "wrong", "wrong, right or all"),
                   Argument("pictures", bool, True, "attach thumbnails"), CURSOR,
                   Argument("page_size", int, 6, "samples per page (12 at most)")), slice_examples),
    AssistantTool("compare_models", "Compare models",
                  "Models slice by slice on shared samples, the baseline first: the paired test per slice, q-values, "
                  "what got better or worse. The numbers of `hibug compare`.",
                  (PROJECT, *taken(CompareModels, "models", "split", "max_depth", "min_support", "tags",
                                models="model names, the baseline first"), CURSOR,
                   SIZE), compare_models),
    AssistantTool("error_types", "Error types",
                  "Score per class and what went wrong: TIDE's error types (boxes, keypoints, masks) or the commonest "
                  "confusions, COCO AP and AP if each error type were fixed.", (PROJECT, *MODEL_SPLIT), error_types),
    AssistantTool("tag_quality", "Tag quality",
                  "Every tag source of every attribute with its measured accuracy against checked tags, and which "
                  "one is in force.", (PROJECT, CURSOR), tag_quality),
    AssistantTool("select_for_repair", "Select data for repair",
                  "Pool samples chosen for the worst error slices (nothing is written).",
                  (PROJECT, *taken(Select, "model", "method", "budget", "split",
                                budget="a count (40) or a share of training (0.1)"), CURSOR), select_for_repair),
    AssistantTool("start_job", "Start a job",
                  "Start a long operation (tag, embed, repair, generate, unseen slices...) as a background job; "
                  "params are the operation's fields as `hibug <command>` takes them.",
                  (PROJECT, Argument("kind", str, description="the operation, e.g. 'tag', 'repair'"),
                   Argument("params", dict | None, None, "its fields, e.g. {\"budget\": 100}")), start_job,
                  read_only=False),
    AssistantTool("job_status", "Job status", "A job's status and progress and its summary when done; or the "
                  "project's recent jobs.", (PROJECT, Argument("job", int | None, None, "job id"), CURSOR),
                  job_status),
    AssistantTool("review_board", "Review board",
                  "The team's reviews of slices (status, assignee, comments count); with a review id, its comments.",
                  (PROJECT, Argument("review", int | None, None, "review id"),
                   Argument("status", str | None, None, STATUS_WORDS), CURSOR), review_board),
    AssistantTool("review_slice", "Review a slice",
                  "Put a slice on the review board, or change a review: comment, status, assignee (editors).",
                  (PROJECT, Argument("slice", str | None, None, SLICE.description),
                   Argument("review", int | None, None, "review id"), Argument("comment", str | None, None),
                   Argument("status", str | None, None, STATUS_WORDS), Argument("assignee", str | None, None),
                   Argument("version", int | None, None, "the version you read (default: the current one)")),
                  review_slice, read_only=False),
)
