"""Object detection: a sample is an object (a ground-truth box, or a detection that matched none), scored by the IoU
of its match; failures carry TIDE's error types; a recorded detector is repaired by fine-tuning on pool images."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd

from hibug_core.config import IngestConfig
from hibug_core.nouns import Nouns
from hibug_core.objects.matching import ERROR_TYPES
from hibug_core.objects.views import OBJECT_CROPS
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.slices.evidence import TASK_EVIDENCE, object_evidence
from hibug_core.tasks.base import COCO_EVALUATION, MANIFEST_SHAPES, Capabilities, ErrorGroup, Shape, Task
from hibug_core.tasks.object_manifest import is_box_column
from hibug_core.tasks.registry import register_task

MANIFEST_SHAPES.add("box", "a box per row ('box', 'pred_box' or 'pred_box:<model>'); every COCO file has boxes",
                    lambda: Shape(is_box_column, lambda truth, results: True))


@register_task
class Detection(Task):
    name = "detection"
    help = "object detection: one sample per object (a true box, or a detection that found none), scored by IoU"
    nouns = Nouns("object", "objects", "IoU", "objects found",
                  "the IoU of the object's match (0 when missed, and for a false positive)",
                  "ground-truth objects and false positives, each a sample")
    views = OBJECT_CROPS
    capabilities = Capabilities(predict=False, generate=False, retrain="fine-tuned on labelled pool images",
                                checkpoint="the detector's kind loads it: `{\"state_dict\", \"classes\", \"config\"}`",
                                instead=(
        ("predict", "running a detector inside hibug is not built yet: import its results as a COCO results file "
                    "(hibug import PROJECT --models-only --coco TRUTH.json --results NAME=results.json)"),
        ("generate", "generated images come without boxes, so they cannot teach a detector: use the prompts to make "
                     "and annotate images yourself (the Repair page's table, or `hibug generate --dry-run`), or repair "
                     "with selected pool images"),
        ("failure_search", "failure search scores generated images of one class by the class the model gives them, "
                           "and generated scenes come without the boxes a detector is scored against: find its "
                           "failures in the error slices (missed objects and bad boxes are failures there), or repair "
                           "with selected pool images")))
    error_groups = (ErrorGroup("box error type", ERROR_TYPES, "TIDE"),)
    focus = "include attributes of hard instances: occlusion, small size, truncation by the image border, crowds"
    overview = COCO_EVALUATION
    shapes = ("box",)
    another_model = ("upload its COCO results on the Overview, or import them: `hibug import PROJECT --models-only "
                     "--coco TRUTH.json --results NAME=results.json`")
    likely_failures = ("objects the detector is likely to miss or to box badly: small, occluded, cut by the image's "
                       "border or crowded objects, and looks or classes that are rare in training")
    library = "detection"

    def coco_matching(self, config):
        """Boxes, even in a file whose people carry keypoints (a pose task matches those)."""
        return dataclasses.replace(config, keypoints=False)

    def validate_table(self, frame: pd.DataFrame, *, source: str, base_dir: Path, default_model: str,
                       config: IngestConfig = IngestConfig(), progress: ProgressCallback = no_progress):
        from hibug_core.tasks.object_manifest import validate_object_manifest

        return validate_object_manifest(frame, source=source, base_dir=base_dir, default_model=default_model,
                                        config=config, progress=progress, task=self.name)

    def sample_table(self, project, model: str | None) -> pd.DataFrame:
        """Each object with its image, kind and box, and the model's outcome on it (matched box, IoU, error type)."""
        return project.samples(model).join(project.objects(model))

    def measured_attributes(self) -> list:
        from hibug_core.attributes.measured import measured_attributes
        from hibug_core.objects.geometry import geometry_attributes

        return [*measured_attributes(), *geometry_attributes()]

    def training_count(self, samples: pd.DataFrame, project) -> int:
        from hibug_core.tasks.object_repair import training_images

        return training_images(samples, project.objects())

    def select_pool(self, report, config, *, project) -> pd.DataFrame:
        from hibug_core.tasks.object_repair import select_pool_images

        return select_pool_images(report, config, project=project)

    def repair_round(self, project, report, config, *, progress: ProgressCallback = no_progress,
                     author: str | None = None):
        from hibug_core.tasks.object_repair import ObjectRepairRound

        return ObjectRepairRound(project, report, config, training_count=self.training_count(report.samples, project),
                                 nouns=self.nouns, progress=progress, author=author)


TASK_EVIDENCE.add(Detection.name, "its objects: annotated in training or not, their boxes, their TIDE error types",
                  lambda *read: object_evidence(*read, nouns=Detection.nouns.samples))
