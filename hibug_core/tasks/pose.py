"""Pose estimation: detection matched by OKS (as FiftyOne treats keypoints): a sample is a person, scored by the OKS
of its match. Imported from COCO keypoint files; everything else is the detection task's."""
from __future__ import annotations

import functools
from pathlib import Path

import pandas as pd

from hibug_core.config import IngestConfig
from hibug_core.nouns import Nouns
from hibug_core.objects.keypoint_errors import INVERSION, KEYPOINT_ERRORS
from hibug_core.objects.matching import ERROR_TYPES
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.slices.evidence import TASK_EVIDENCE, object_evidence
from hibug_core.tasks.base import MANIFEST_SHAPES, Capabilities, ErrorGroup, Shape
from hibug_core.tasks.detection import Detection
from hibug_core.tasks.registry import register_task

KEYPOINT_COLUMNS = ("keypoints", "pred_keypoints")  # a per-row manifest of people (pose) names these
# A COCO file draws skeletons when its categories name keypoints (an unlabelled pool's file has no annotations).
MANIFEST_SHAPES.add("keypoints", "a skeleton per row ('keypoints', 'pred_keypoints' or 'pred_keypoints:<model>'), or "
                    "COCO categories that name keypoints",
                    lambda: Shape(lambda column: column in KEYPOINT_COLUMNS or column.startswith("pred_keypoints:"),
                                  lambda truth, results: bool(truth.keypoints)))


@register_task
class Pose(Detection):
    name = "pose"
    help = "pose estimation: one sample per person (a true skeleton, or a prediction that found none), scored by OKS"
    nouns = Nouns("person", "people", "OKS", "people found",
                  "the OKS of the person's match (0 when missed, and for a false positive)",
                  "ground-truth people and false positives, each a sample")
    capabilities = Capabilities(predict=False, generate=False, retrain="fine-tuned on labelled pool images",
                                checkpoint="its family loads it, e.g. scene-keypoints: `{\"state_dict\", \"classes\", "
                                           "\"keypoints\", \"config\"}`",
                                instead=(("predict", "import the keypoint model's results as a COCO results file "
                                                     "(hibug import PROJECT --models-only --coco TRUTH.json --results "
                                                     "NAME=results.json)"),
                                         ("generate", "generated images come without keypoints, so they cannot teach "
                                                      "a pose model; repair with selected pool images"),
                                         ("failure_search", "failure search scores generated images of one class by "
                                                            "the class the model gives them, and generated scenes "
                                                            "come without the keypoints a pose model is scored "
                                                            "against: find its failures in the error slices (missed "
                                                            "people and keypoint errors are failures there), or "
                                                            "repair with selected pool images")))
    # A missed person that a prediction went with is typed by its commonest keypoint error; one no prediction went
    # with, by TIDE's box error types.
    error_groups = (ErrorGroup("keypoint error type", KEYPOINT_ERRORS, "Ronchi and Perona"),
                    ErrorGroup("box error type", ERROR_TYPES, "TIDE"))
    focus = "include attributes of hard instances: occlusion, truncation, unusual poses, small people, crowds"
    likely_failures = ("people whose keypoints the model is likely to miss or swap: unusual poses, people seen from "
                       "behind or with crossing limbs, small, occluded or truncated people")
    library = "pose"
    shapes = ("keypoints", "box")

    def coco_matching(self, config):
        """By OKS where the files carry keypoints (as given: asked for, or found in the files)."""
        return config

    def prediction_words(self, row) -> str:
        """A person found with left and right mirrored is said so, not "missed": a prediction was there."""
        if row.get("error_type") == INVERSION and row.get("outcome") == "missed":
            return "found, keypoints inverted"
        return super().prediction_words(row)

    def measured_attributes(self) -> list:
        from hibug_core.objects.pose_geometry import pose_attributes

        return [*super().measured_attributes(), *pose_attributes()]

    def truth_measures_job(self, truth, objects: pd.DataFrame):
        """What each person's true keypoints say (pose_geometry): orientation, facing, visible keypoints, limbs."""
        from hibug_core.objects.pose_geometry import measure_people

        if not truth.has_keypoints:
            return None
        return functools.partial(measure_people, objects["keypoints"].tolist(), next(iter(truth.keypoints.values())))

    def validate_table(self, frame: pd.DataFrame, *, source: str, base_dir: Path, default_model: str,
                       config: IngestConfig = IngestConfig(), progress: ProgressCallback = no_progress):
        from hibug_core.tasks.object_manifest import validate_object_manifest

        return validate_object_manifest(frame, source=source, base_dir=base_dir, default_model=default_model,
                                        config=config, progress=progress, task=self.name)


TASK_EVIDENCE.add(Pose.name, "its people: annotated in training or not, keypoints mirrored or left out, their error "
                  "types", lambda *read: object_evidence(*read, nouns=Pose.nouns.samples))
