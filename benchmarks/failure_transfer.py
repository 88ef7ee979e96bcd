"""Benchmark: do the failures a generative search finds on one model transfer to models of the same architecture at
other capacities? (Wiles et al.'s §4: "failures transfer well between models of the same architecture".)

The models are the classification demo's shape CNN and the same network at other widths (benchmarks/model_study.py
trains them into --dir, reused when there). The search (hibug_core.repair.failure_search, as `hibug failure-search`
runs it) captions --label failures of the source model (the demo's) and keeps the captions that fail significantly
more often than the baseline prompt; each kept caption, and the baseline, is then tested as a typed caption on every
model, on new images (one-sided Fisher test against the baseline, FDR over the captions). Printed: per caption and
model, its failure rate, the baseline's, and whether it fails significantly more often.

Then the paper's own measure of transfer ("78% of the failures in IN-G-RN transfer to RN2"): a fixed failure set,
images generated from the kept captions (--sample per caption) of which the source model fails at most --keep per
caption, and the share of that set each other model fails too.
Usage: python benchmarks/failure_transfer.py [--label triangle] [--captions 4] [--images 64] [--sample 200]
       [--keep 50] [--dir model-study]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

from hibug_core.bench.summary import markdown_table
from hibug_core.cli.command import generator_and_captioner, model_arguments
from hibug_core.demo import DEMOS
from hibug_core.demo.study import StudyConfig, add_study_models
from hibug_core.repair.failure_search import FailureSearchConfig, failure_search, network_predictor, ranked_classes

TYPED = "typed by a person"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="triangle")
    parser.add_argument("--captions", type=int, default=4, help="source failures captioned")
    parser.add_argument("--images", type=int, default=64, help="images per caption tested")
    parser.add_argument("--sample", type=int, default=200, help="the failure set: images drawn per kept caption...")
    parser.add_argument("--keep", type=int, default=50, help="... of which at most this many the source fails kept")
    parser.add_argument("--widths", type=int, nargs="+", default=[4, 16, 32])
    parser.add_argument("--seed", type=int, default=0)
    model_arguments(parser, llm=True, generator=True, captioner=True)
    parser.add_argument("--dir", default="model-study")
    args = parser.parse_args()
    started = time.perf_counter()
    project = DEMOS.build("classification", folder=Path(args.dir) / "classification")
    source = project.models()[0]
    models = [source, *add_study_models(project, "classification", StudyConfig(widths=tuple(args.widths)))]
    predictors = {m: network_predictor(project, m) for m in models}
    project.close()
    config = FailureSearchConfig(images_per_caption=args.images, captions=args.captions, seed=args.seed)
    generator, captioner = generator_and_captioner(args)
    found = failure_search(generator, predictors[source], captioner, args.label, config=config)
    kept = found.loc[found["significant"], "caption"].tolist()
    print(f"{source}: {len(found) - 1} captions of '{args.label}' failures tested, {len(kept)} fail significantly "
          f"more often than '{found['caption'].iat[0]}' ({found['failure_rate'].iat[0]:.1%})\n")
    if not kept:
        return
    rows = []
    retest = FailureSearchConfig(images_per_caption=args.images, caption_failures=False, refine=False,
                                 seed=args.seed + 1)
    for model in models:
        table = failure_search(generator, predictors[model], captioner, args.label, typed=kept,
                               config=retest)
        baseline = table.iloc[0]
        for row in table[table["origin"] == TYPED].itertuples():
            rows.append({"caption": row.caption, "model": model, "failure rate": f"{row.failure_rate:.1%}",
                         "baseline": f"{baseline['failure_rate']:.1%}", "times as likely":
                         f"{row.failure_rate / max(baseline['failure_rate'], 1 / args.images):.1f}",
                         "significant": bool(row.significant)})
    frame = pd.DataFrame(rows)
    print(markdown_table(frame))
    held = frame[frame["model"] != source]
    print(f"\n{int(held['significant'].sum())} of {len(held)} (caption, other model) pairs fail significantly more "
          f"often than the baseline")
    print("\n" + markdown_table(failure_set_transfer(kept, predictors, source, generator, args)))
    print(f"\n{time.perf_counter() - started:.0f} s")


def failure_set_transfer(captions: list[str], predictors: dict, source: str, generator, args) -> pd.DataFrame:
    """Wiles et al.'s measure: the source model's failures among --sample images of each caption (at most --keep per
    caption) as one fixed set, and the share of it each model fails (the source: 100% by construction)."""
    kept = []
    for k, caption in enumerate(captions):
        seeds = [(args.seed + 7) * 1_000_003 + k * args.sample + i for i in range(args.sample)]
        images = generator.generate([caption] * args.sample, seeds)
        wrong = [args.label not in ranked[:1] for ranked in ranked_classes(predictors[source](images))]
        kept += [image for image, failed in zip(images, wrong) if failed][:args.keep]
    rows = []
    for model, predict in predictors.items():
        failed = [args.label not in ranked[:1] for ranked in ranked_classes(predict(kept))] if kept else []
        rows.append({"model": model, "failure set": len(kept), "fails too": int(sum(failed)),
                     "transfer": f"{sum(failed) / max(len(kept), 1):.1%}"})
    return pd.DataFrame(rows)


if __name__ == "__main__":
    main()
