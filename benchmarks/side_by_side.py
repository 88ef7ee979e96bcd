"""Benchmark: two hibug processes side by side on a few cores, with torch's OpenMP workers spinning (libgomp's default)
or waiting passively (hibug's default, OMP_WAIT_POLICY=PASSIVE set in hibug_core).

The work is what a served dashboard's jobs do: the pose demo's Keypoint R-CNN finding people in rendered scenes. Each
policy runs it once alone, then as two processes started together; printed: the wall time of each, and the pair's time
against twice the lone one (1.0x: the two shared the cores as well as running them one after the other; more: they
got in each other's way).
Usage: python benchmarks/side_by_side.py [--scenes 384] [--repeats 3]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

WORK = """
import sys
if sys.argv[1] == "spinning":
    import torch  # libgomp loads before hibug_core can choose, so it keeps its default: spin, then sleep
import hibug_core  # noqa: F401
from hibug_core.demo.figures import render_figures
from hibug_core.demo.pose import ASSET_MODEL
from hibug_core.models.zoo.scene_keypoints import detect_people, load_keypoint_model

images, _ = render_figures(int(sys.argv[2]), 5)
model, classes, _, _ = load_keypoint_model(ASSET_MODEL)
detect_people(model, images, classes)
"""


def timed(policy: str, scenes: int, processes: int) -> float:
    """Seconds until `processes` copies of the work, started together under `policy`, have all finished."""
    environment = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    started = time.perf_counter()
    running = [subprocess.Popen([sys.executable, "-c", WORK, policy, str(scenes)], env=environment)
               for _ in range(processes)]
    if any(process.wait() for process in running):
        raise SystemExit(f"the work failed under {policy}")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", type=int, default=384)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores; {args.scenes} scenes per process; median of {args.repeats}\n")
    print("| OpenMP workers | one alone | two side by side | two against twice one |")
    print("| --- | --- | --- | --- |")
    for policy in ("spinning", "passive"):
        alone = sorted(timed(policy, args.scenes, 1) for _ in range(args.repeats))[args.repeats // 2]
        pair = sorted(timed(policy, args.scenes, 2) for _ in range(args.repeats))[args.repeats // 2]
        print(f"| {policy} | {alone:.1f} s | {pair:.1f} s | {pair / (2 * alone):.2f}x |", flush=True)


if __name__ == "__main__":
    main()
