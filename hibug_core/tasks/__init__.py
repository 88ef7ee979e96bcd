"""Tasks: what differs between classification, detection, pose and segmentation, one registered Task each
(hibug_core.tasks.base); generic code asks a project's Task (task_of) instead of asking which task it is."""
from hibug_core.tasks import classification, detection, pose, segmentation  # noqa: F401 (each registers its task)
from hibug_core.tasks.base import Nouns, Task, TaskError
from hibug_core.tasks.importing import load_coco, load_manifest, load_uploaded_manifest
from hibug_core.tasks.registry import TASKS, all_tasks, task_named, task_of

__all__ = ["TASKS", "Nouns", "Task", "TaskError", "all_tasks", "load_coco", "load_manifest", "load_uploaded_manifest",
           "task_named", "task_of"]
