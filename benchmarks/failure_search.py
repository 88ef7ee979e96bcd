"""Benchmark: Wiles et al.'s generative failure search on the demo, three ways: the first failures captioned, the
failures clustered first, and a caption typed by a person; with each caption's target-label rate.

On the classification demo (built offline, or reused from --dir) it draws --label from the shape-world renderer (the
offline stand-in for a diffusion model, which also describes what it drew, standing in for a captioning model), tests
each caption against the baseline prompt (one-sided Fisher test, FDR over the captions tested) and refines the
significant ones, as `hibug failure-search` does. Arms: "first failures" (the first --captions failures captioned),
"clustered" (k-means over their --encoder embeddings, the failure nearest each centre captioned; Wiles et al.) and
"typed" (only the --typed captions, as a person types them). Per arm it prints the captions tested, the significant
ones, the kinds of failure captioned, and for the significant captions and the typed ones their failure rate and
target-label rate: the share of their images given the label their failures go to most, against the baseline's
share (Wiles et al.'s Eq. 2, as hibug reads it).
Usage: python benchmarks/failure_search.py [--dir /tmp/hibug-failure-search] [--label triangle] [--captions 4]
       [--images 32] [--typed "A blue triangle."] [--encoder conse] [--seed 0]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

from hibug_core.bench.summary import markdown_table
from hibug_core.cli.command import generator_and_captioner, model_arguments
from hibug_core.demo.build import ensure_demo
from hibug_core.repair.failure_search import (
    FailureSearchConfig,
    encoder_embedding,
    failure_search,
    network_predictor,
)

SHOWN = ["caption", "origin", "failure_rate", "q_value", "failures_go_to", "target_rate", "baseline_target_rate"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="/tmp/hibug-failure-search")
    parser.add_argument("--label", default="triangle")
    parser.add_argument("--captions", type=int, default=4, help="failures captioned per arm")
    parser.add_argument("--images", type=int, default=32, help="images per caption tested")
    parser.add_argument("--typed", nargs="+", default=["A blue triangle."], help="the typed arm's captions")
    parser.add_argument("--seed", type=int, default=0)
    model_arguments(parser, encoder=True, llm=True, generator=True, captioner=True)  # the encoder clusters failures
    args = parser.parse_args()
    project = ensure_demo(Path(args.dir) / "demo")
    try:
        predict = network_predictor(project, project.models()[0])
    finally:
        project.close()
    embed = encoder_embedding(args.encoder)
    generator, captioner = generator_and_captioner(args)
    base = FailureSearchConfig(images_per_caption=args.images, captions=args.captions, seed=args.seed)
    arms = {"first failures": (base, None, None),
            "clustered": (FailureSearchConfig(**{**base.__dict__, "cluster": True}), embed, None),
            "typed": (FailureSearchConfig(**{**base.__dict__, "caption_failures": False}), None, args.typed)}
    summary = []
    for arm, (config, arm_embed, typed) in arms.items():
        start = time.perf_counter()
        table = failure_search(generator, predict, captioner, args.label, typed=typed,
                               embed=arm_embed, config=config)
        seconds = time.perf_counter() - start
        baseline = table.iloc[0]
        captioned = table.loc[table["origin"] == "caption of a failure", "caption"].tolist()
        summary.append({"arm": arm, "captions tested": len(table) - 1, "significant": int(table["significant"].sum()),
                        "baseline failure rate": f"{baseline['failure_rate']:.1%}", "seconds": round(seconds, 1)})
        print(f"\n### {arm}: {len(table) - 1} captions tested against '{baseline['caption']}' "
              f"({baseline['failure_rate']:.1%} of its {baseline['images']} images fail), {seconds:.0f} s")
        if captioned:
            print("\nFailures captioned: " + "; ".join(captioned))
        shown = table[table["significant"] | (table["origin"] == "typed by a person")][SHOWN]
        print()
        print(markdown_table(shown.assign(**{c: shown[c].map(lambda v: f"{v:.1%}") for c in
                                             ("failure_rate", "target_rate", "baseline_target_rate")}))
              if len(shown) else "No caption fails significantly more often than the baseline.")
    print("\n### Summary\n")
    print(markdown_table(pd.DataFrame(summary)))


if __name__ == "__main__":
    main()
