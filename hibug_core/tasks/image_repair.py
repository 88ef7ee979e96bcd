"""A classifier's repair round: held-out images right or wrong before, new labelled images (selected from the pool or
generated), the classifier retrained (fine-tuned, from scratch, or a linear head), each held-out image after."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from hibug_core.models.finetune import DecodedImages
from hibug_core.repair.loop import CONTROL, GENERATED, RepairError, RepairRound, RoundResult, planted_definitions
from hibug_core.repair.names import repaired_name
from hibug_core.repair.retrain import retrain
from hibug_core.repair.selection import select_pool
from hibug_core.slices.search import TagMatrix


class ImageRepairRound(RepairRound):
    def __init__(self, project, report, config, *, training_count: int, nouns, progress, author: str | None = None):
        # 1. Check inputs: a labelled held-out split to compare on.
        held_tags, held = report.split_matrix(config.eval_split, labelled=True)
        if held.empty:
            raise RepairError(f"no labelled '{config.eval_split}' images to compare before and after on; import a "
                              "held-out split or choose another")
        self.project, self.report, self.config, self.progress, self.author = project, report, config, progress, author
        self.measure, self.samples = nouns.measure, nouns.samples  # the task's words: "accuracy", "images"
        self.held, self.held_tags = held, held_tags
        # Planted slices are measured with the true tags (imported), the found ones with the tags they were found with.
        planted = planted_definitions(project)
        self.planted_tags = (TagMatrix.from_frame(project.known_tags().reindex(held.index).astype("category"))
                             if planted else held_tags)
        self.before = (held["prediction"] == held["label"]).to_numpy()
        self.training_count = training_count
        self.images = DecodedImages()

    def new_data(self, method: str, seed: int, budget: int):
        if method == CONTROL:
            return np.zeros(0, np.int64), None, 0
        if method == GENERATED:
            samples = self.report.samples
            ids = samples.index[samples["split"] == GENERATED].to_numpy()
            if not len(ids):
                raise RepairError("the project has no generated images yet; generate some first (Repair page or "
                                  "`hibug generate`)")
            return ids, None, len(ids)
        selection = select_pool(self.report, replace(self.config.selection, method=method, budget=budget, seed=seed),
                                project=self.project)
        return selection.index.to_numpy(), selection, len(selection)

    def retrain(self, method: str, seed: int, data, run_id: int) -> RoundResult:
        config = self.config
        retrained = replace(config.retrain, seed=seed, fine_tune=replace(config.retrain.fine_tune, seed=seed))
        made: dict = {}
        sample_ids, probabilities, classes = retrain(self.project, self.report.model, data, retrained,
                                                     images=self.images, outputs=made)
        if config.record_models:
            self.project.add_predictions(repaired_name(self.report.model, run_id, method, seed), sample_ids,
                                         probabilities, classes, author=self.author,
                                         note={"repair_run": run_id, "method": method, "seed": seed, **made})
        predicted = pd.Series(np.asarray(classes, dtype=object)[probabilities.argmax(axis=1)], index=sample_ids)
        after = (predicted.reindex(self.held.index) == self.held["label"]).to_numpy()
        return RoundResult(after, len(data), {"checkpoint": made.get("checkpoint")})
