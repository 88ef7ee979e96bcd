"""Instance segmentation: detection matched by masks (COCO's "segm"): a sample is an object (a true mask, or a
predicted one that matched none), scored by the mask IoU of its match; failures carry TIDE's error types on masks,
and an object found in place but outlined badly (Boundary IoU, Cheng et al. 2021) is told apart. Imported from COCO
files whose ground truth and results all carry masks; everything else is the detection task's."""
from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import pandas as pd

from hibug_core.config import IngestConfig
from hibug_core.nouns import Nouns
from hibug_core.objects.matching import ERROR_TYPES, OUTLINE_ERROR
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.slices.evidence import TASK_EVIDENCE, object_evidence
from hibug_core.tasks.base import MANIFEST_SHAPES, Capabilities, ErrorGroup, Shape, TaskError
from hibug_core.tasks.detection import Detection
from hibug_core.tasks.registry import register_task


def _masks_everywhere(truth, results: list) -> bool:
    """Every results file outlines each of its detections by a mask, and the ground truth each of its objects (a
    pool's file, with no objects, says nothing against it)."""
    objects = [record for record in truth.dataset["annotations"] if not record.get("iscrowd")]
    return (bool(results) and all(found.has_masks for found in results)
            and all(record.get("segmentation") is not None for record in objects))


MANIFEST_SHAPES.add("mask", "a mask ('segmentation', polygons or run-length encoded) on every object of a COCO ground "
                    "truth and every detection of its results", lambda: Shape(lambda column: False, _masks_everywhere))


@register_task
class Segmentation(Detection):
    name = "segmentation"
    help = ("instance segmentation: one sample per object (a true mask, or a predicted mask that found none), scored "
            "by mask IoU")
    nouns = Nouns("object", "objects", "mask IoU", "objects found",
                  "the mask IoU of the object's match (0 when missed, and for a false positive)",
                  "ground-truth objects and false positives, each a sample outlined by its mask",
                  ap="mask AP")
    capabilities = Capabilities(predict=False, generate=False, retrain="fine-tuned on labelled pool images",
                                checkpoint="its family loads it, e.g. scene-masks: `{\"state_dict\", \"classes\", "
                                           "\"config\"}`",
                                instead=(
        ("predict", "import the mask model's results as a COCO results file with a 'segmentation' per detection "
                    "(hibug import PROJECT --models-only --coco TRUTH.json --results NAME=results.json)"),
        ("generate", "generated images come without masks, so they cannot teach a mask model; repair with selected "
                     "pool images"),
        ("failure_search", "failure search scores generated images of one class by the class the model gives them, "
                           "and generated scenes come without the masks a mask model is scored against: find its "
                           "failures in the error slices (missed objects and bad outlines are failures there), or "
                           "repair with selected pool images")))
    # An object found in place whose outline is wrong is typed by its Boundary IoU; a missed object and a false
    # positive by TIDE's types, told by mask IoU.
    error_groups = (ErrorGroup("mask outline", (OUTLINE_ERROR,), "Boundary IoU"),
                    ErrorGroup("mask error type", ERROR_TYPES, "TIDE"))
    focus = ("include attributes of hard instances and of hard outlines: thin or elongated parts, holes, objects in "
             "pieces, occlusion, small size, colours that blend into the background")
    likely_failures = ("objects whose masks the model is likely to miss or outline badly: thin, elongated or ragged "
                       "shapes, holes, occluded or small objects, and looks or classes rare in training")
    shapes = ("mask", "box")
    another_model = ("upload its COCO results (with masks) on the Overview, or import them: `hibug import PROJECT "
                     "--models-only --coco TRUTH.json --results NAME=results.json`")

    def prediction_words(self, row) -> str:
        """An object whose mask of its class lies in place but is outlined badly is said so, not "missed": the model
        found it, and its mask IoU fell below the threshold by the outline."""
        if row.get("error_type") == OUTLINE_ERROR and row.get("outcome") == "missed":
            return "found, outline error"
        return super().prediction_words(row)

    def validate_table(self, frame: pd.DataFrame, *, source: str, base_dir: Path, default_model: str,
                       config: IngestConfig = IngestConfig(), progress: ProgressCallback = no_progress):
        raise TaskError(f"{source}: a project of masks is made from COCO files (hibug new PROJECT --coco TRUTH.json "
                        "--results NAME=results.json), not from a table")

    def coco_matching(self, config):
        return dataclasses.replace(config, masks=True)

    def measured_attributes(self) -> list:
        from hibug_core.objects.mask_geometry import mask_attributes

        return [*super().measured_attributes(), *mask_attributes()]

    def truth_measures_job(self, truth, objects: pd.DataFrame):
        """What each object's true mask says (mask_geometry): fill, elongation, holes, pieces, outline, occlusion."""
        from hibug_core.objects.mask_geometry import measure_stored_masks

        return functools.partial(measure_stored_masks, objects["mask"].to_numpy(object),
                                 objects["image_id"].to_numpy())


TASK_EVIDENCE.add(Segmentation.name, "its objects: annotated in training or not, their boxes, their outlines and "
                  "TIDE error types", lambda *read: object_evidence(*read, nouns=Segmentation.nouns.samples))
