"""Generated images in the project: written as files, imported as the split "generated" with their class, prompt,
slice, generator and seed, in one run that lands whole or not at all."""
from __future__ import annotations

import logging
import shutil

import numpy as np
import pandas as pd
from sqlalchemy import text

from hibug_core.config import SPLITS, IngestConfig
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.repair.generators import Generator, generate_images
from hibug_core.repair.prompts import COLUMNS, images_per_prompt
from hibug_core.repair.runs import finish_run, start_run
from hibug_core.safe_files import folder_within
from hibug_core.store.db import read_connection

logger = logging.getLogger(__name__)

GENERATED_SPLIT = "generated"
GENERATED_DIR = "generated"


def generate_for_prompts(project, generator: Generator, prompts: pd.DataFrame, n_images: int, *, seed: int = 0,
                         batch_size: int = 4, author: str | None = None,
                         progress: ProgressCallback = no_progress) -> int:
    """Generate n_images over `prompts` (prompt_columns; split by weight), store them, and return the run id."""
    from hibug_core.ingest.manifest import validate_manifest

    missing = [c for c in COLUMNS if c not in prompts.columns]
    if missing:
        raise ValueError(f"prompts need the columns {', '.join(missing)}")
    counts = images_per_prompt(prompts, n_images)
    plan = prompts.loc[prompts.index.repeat(counts)].reset_index(drop=True)
    seeds = [seed * 1_000_003 + i for i in range(len(plan))]
    run_id = start_run(project, "generation", {"generator": generator.name, "images": int(len(plan)), "seed": seed,
                                               "prompts": prompts[COLUMNS].to_dict("records")}, author=author)
    images = generate_images(generator, list(plan["prompt"]), seeds, batch_size=batch_size, progress=progress)
    folder = folder_within(project.folder, project.folder / GENERATED_DIR / f"run-{run_id}")  # never via a link
    try:
        names = [f"{i:05d}.png" for i in range(len(images))]
        for name, image in zip(names, images):
            image.save(folder / name)
        manifest = pd.DataFrame({"id": [f"generated-{run_id}-{i}" for i in range(len(names))], "image": names,
                                 "label": plan["label"].astype(str), "split": GENERATED_SPLIT})
        validated = validate_manifest(manifest, source=f"generation run {run_id}", base_dir=folder,
                                      config=IngestConfig(allowed_splits=SPLITS + (GENERATED_SPLIT,),
                                                          require_model=False))

        def describe_images(connection, ids: dict[str, int]) -> None:
            connection.execute(
                text("INSERT INTO generated_images (sample_id, run_id, prompt, slice_id, generator, seed) "
                     "VALUES (:s, :r, :p, :sl, :g, :seed)"),
                [{"s": ids[key], "r": run_id, "p": p, "sl": sl, "g": generator.name, "seed": int(sd)}
                 for key, p, sl, sd in zip(manifest["id"], plan["prompt"], plan["slice_id"], seeds)])

        summary = project.import_manifest(validated, author=author, kind="generated", also=describe_images)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    finish_run(project, run_id, {"images": len(images), "import_id": summary.import_id}, author=author)
    logger.info("generated %d images with %s (run %d)", len(images), generator.name, run_id)
    return run_id


def generated_images(project, run_id: int | None = None) -> pd.DataFrame:
    """The generated samples (index: sample id) with image path, label, prompt, slice, generator, seed and run."""
    with read_connection(project.engine) as connection:
        frame = pd.read_sql_query(text("SELECT * FROM generated_images ORDER BY sample_id"), connection,
                                  index_col="sample_id")
    if run_id is not None:
        frame = frame[frame["run_id"] == run_id]
    samples = project.samples(sample_ids=frame.index.to_numpy(np.int64))
    return samples[["image_path", "label", "content_hash"]].join(frame)
