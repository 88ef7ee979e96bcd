"""The bundled demos, one per task: easy-vqa shapes with a CNN (classification), scenes of shapes with a detector
(detection), scenes of drawn figures with a keypoint model (pose) and scenes of shapes with a mask model
(segmentation), each with planted bugs."""
from __future__ import annotations

from pathlib import Path

from hibug_core.demo.build import DemoConfig, build_demo, ensure_demo, open_or_build
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.registry import Registry

DEMOS = Registry("demo")  # name: the task it shows; build(folder, progress) opens it, building it first if needed


@DEMOS.register("classification", "easy-vqa shapes and a CNN (default)")
def _classification(folder: str | Path, progress: ProgressCallback = no_progress):
    return ensure_demo(folder, DemoConfig(), progress=progress)


@DEMOS.register("detection", "scenes of shapes and a detector (FCOS), one sample per object")
def _detection(folder: str | Path, progress: ProgressCallback = no_progress):
    from hibug_core.demo.detection import DetectionDemoConfig, build_detection_demo

    return open_or_build(folder, lambda where: build_detection_demo(where, DetectionDemoConfig(), progress=progress))


@DEMOS.register("pose", "scenes of drawn figures and a keypoint model (Keypoint R-CNN), one sample per person")
def _pose(folder: str | Path, progress: ProgressCallback = no_progress):
    from hibug_core.demo.pose import PoseDemoConfig, build_pose_demo

    return open_or_build(folder, lambda where: build_pose_demo(where, PoseDemoConfig(), progress=progress))


@DEMOS.register("segmentation", "scenes of shapes and a mask model (Mask R-CNN), one sample per object outlined by "
                "its mask")
def _segmentation(folder: str | Path, progress: ProgressCallback = no_progress):
    from hibug_core.demo.segmentation import SegmentationDemoConfig, build_segmentation_demo

    return open_or_build(folder, lambda where: build_segmentation_demo(where, SegmentationDemoConfig(),
                                                                       progress=progress))


def demo_folder(name: str) -> str:
    """A demo's default folder: hibug-demo for the first (the default), hibug-<name>-demo for the others."""
    DEMOS.get(name)
    return "hibug-demo" if name == DEMOS.names()[0] else f"hibug-{name}-demo"


__all__ = ["DEMOS", "DemoConfig", "build_demo", "demo_folder", "ensure_demo"]
