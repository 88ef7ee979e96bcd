"""The task registry: one Task per kind of model (classification, detection, pose, segmentation), the task a project
states, and which task claims a manifest or a COCO file."""
from __future__ import annotations

from hibug_core.registry import Registry
from hibug_core.tasks.base import Task, TaskError, drawn_coco_shapes

TASKS = Registry("task")  # each entry's build() gives the one instance of its task
DEFAULT_TASK = "classification"  # what a project with nothing imported yet reads as (it has no samples to be else)


def register_task(task_class: type[Task]) -> type[Task]:
    """Class decorator: one instance of the task answers to its name."""
    instance = task_class()
    TASKS.add(task_class.name, task_class.help, lambda: instance)
    return task_class


def task_named(name: str) -> Task:
    entry = TASKS.find(name)
    if entry is None:
        raise TaskError(f"unknown task '{name}'; hibug knows {', '.join(TASKS.names(hidden=True))}")
    return entry.build()


def task_of(project) -> Task:
    """The task the project stated at its first import."""
    return task_named(project.task or DEFAULT_TASK)


def all_tasks() -> list[Task]:
    return [entry.build() for entry in TASKS]


def claiming_table(columns: list[str], source: str) -> Task:
    """The one task whose manifests have these columns."""
    claims = [task for task in all_tasks() if task.claims_table(columns)]
    if len(claims) != 1:
        raise TaskError(f"{source}: {'no task reads' if not claims else 'more than one task could read'} a manifest "
                        f"with the columns {', '.join(columns[:12])}; see the README's data contract")
    return claims[0]


def claiming_coco(truth, results: list, task: str | None = None) -> Task:
    """The one task whose samples a COCO ground truth and its results files (CocoResults) hold, by the shapes they
    draw (boxes: detection; keypoints: pose; masks in both: segmentation); or `task`, a person's choice, where the
    files draw every shape it needs (a detection project from files that also carry masks)."""
    if task is not None:
        chosen = task_named(task)
        if not chosen.reads_coco(truth, results):
            raise TaskError(_what_is_lacking(chosen, truth, results))
        return chosen
    claims = [task for task in all_tasks() if task.claims_coco(truth, results)]
    if len(claims) != 1:
        raise TaskError(f"{truth.source}: no single task reads this COCO file ({len(claims)} claim it)")
    return claims[0]


def _what_is_lacking(task: Task, truth, results: list) -> str:
    """Which shape the task reads the files do not all carry, and which files must carry it (named by file name and
    model, never by the server's path)."""
    from pathlib import Path

    if not task.shapes:
        return f"the {task.name} task reads no COCO file: its samples are whole images"
    drawn = drawn_coco_shapes(truth, results)
    missing = " and ".join(shape for shape in task.shapes if shape not in drawn)
    models = ", ".join(repr(found.model) for found in results)
    return (f"the {task.name} task reads {' and '.join(task.shapes)}; {missing} is not carried by every file: the "
            f"objects of {Path(truth.source).name} and the detections of {models or 'every results file'} each need "
            f"it ({task.nouns.samples} are matched by {task.nouns.score})")
