"""Image classification: a sample is an image, right or wrong; the classifier can be run, retrained and repaired with
selected or generated images."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from hibug_core.config import IngestConfig
from hibug_core.nouns import Nouns
from hibug_core.objects.views import WHOLE_IMAGE
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.tasks.base import PER_CLASS, Capabilities, Task
from hibug_core.tasks.registry import register_task


@register_task
class Classification(Task):
    name = "classification"
    help = "image classification: one sample per image, scored right or wrong"
    nouns = Nouns("image", "images", "accuracy", "accuracy", "1 when the prediction is the label, else 0",
                  "each image is a sample")
    views = WHOLE_IMAGE
    capabilities = Capabilities(predict=True, generate=True, retrain="fine-tuned, retrained, or a linear head",
                                checkpoint="`{\"state_dict\", \"classes\", \"spec\"}`: load it into the same "
                                           "architecture, or run it with `hibug predict`", failure_search=True,
                                retrain_methods=("fine-tune", "from scratch", "linear head"))
    focus = ("include attributes that blur the boundary between two similar classes, since those are where the model "
             "is likely to fail")
    overview = PER_CLASS
    another_model = ("run it on the images (Overview, or `hibug predict`), or import its predictions as a "
                     "`pred:<name>` column (`hibug import PROJECT --models-only --manifest M.csv`)")
    likely_failures = ("classes easily confused with each other, and attribute tags that blur the difference between "
                       "them")

    def validate_table(self, frame: pd.DataFrame, *, source: str, base_dir: Path, default_model: str,
                       config: IngestConfig = IngestConfig(), progress: ProgressCallback = no_progress):
        from hibug_core.ingest.manifest import validate_manifest

        return validate_manifest(frame, source=source, base_dir=base_dir, default_model=default_model, config=config,
                                 progress=progress)

    def measured_attributes(self) -> list:
        from hibug_core.attributes.measured import measured_attributes

        return measured_attributes()

    def training_count(self, samples: pd.DataFrame, project) -> int:
        from hibug_core.repair.selection import labelled_training_images

        return labelled_training_images(samples)

    def select_pool(self, report, config, *, project) -> pd.DataFrame:
        from hibug_core.repair.selection import select_pool

        return select_pool(report, config, n_train=self.training_count(report.samples, project), project=project)

    def repair_round(self, project, report, config, *, progress: ProgressCallback = no_progress,
                     author: str | None = None):
        from hibug_core.tasks.image_repair import ImageRepairRound

        return ImageRepairRound(project, report, config, training_count=self.training_count(report.samples, project),
                                nouns=self.nouns, progress=progress, author=author)
