"""The object tables of a project's store: the object columns of its samples, each model's outcome per object and its
COCO evaluation per import (written by an import, read by the Project's object methods)."""
from __future__ import annotations

import collections
import json
from typing import TYPE_CHECKING

import numpy as np
from sqlalchemy import Connection, text

from hibug_core.store.audit import now
from hibug_core.store.db import insert_columns, read_connection, sql_values
from hibug_core.store.row_blocks import read_frame

if TYPE_CHECKING:
    import pandas as pd

OBJECT_COLUMNS = ("image_key", "object_kind", "owner", "box_x", "box_y", "box_w", "box_h", "keypoints_json",
                  "mask_json")


def object_columns(objects: pd.DataFrame | None) -> dict[str, np.ndarray]:
    """An object manifest's box, image and kind columns for the samples insert ({} for images)."""
    return {} if objects is None else {c: sql_values(objects[c]) for c in OBJECT_COLUMNS}


def insert_object_evaluation(connection: Connection, model_id: int, import_id: int, sample_ids: np.ndarray,
                              splits: list[str], evaluation) -> None:
    """One model's outcome per object sample and its COCO summary over one import's ground truth
    (hibug_core.tasks.object_import.ObjectEvaluation)."""
    outcomes = evaluation.outcomes
    columns = ("outcome", "error_type", "iou", "predicted_class", "pred_x", "pred_y", "pred_w", "pred_h",
               "nearest_label", "keypoint_types", "keypoint_similarity_json", "pred_keypoints_json", "pred_mask_json",
               "boundary_iou")
    insert_columns(connection, "object_outcomes", {
        "model_id": int(model_id), "sample_id": sample_ids[outcomes["row"].to_numpy()],
        **{c: sql_values(outcomes[c]) for c in columns}},
        len(outcomes))
    if not evaluation.summary:  # unlabelled images (a pool): nothing to evaluate
        return
    connection.execute(
        text("INSERT INTO object_evaluations (model_id, import_id, splits, settings_json, summary_json, "
             "per_class_json, fixes_json, created_at) VALUES (:m, :i, :p, :s, :y, :c, :f, :t)"),
        {"m": int(model_id), "i": int(import_id), "p": ",".join(splits), "s": json.dumps(evaluation.settings),
         "y": json.dumps(evaluation.summary), "c": evaluation.per_class.to_json(orient="records"),
         "f": evaluation.fixes.to_json(orient="records") if evaluation.fixes is not None else None, "t": now()})


def read_object_rows(connection: Connection) -> pd.DataFrame:
    """Object samples (index: sample id) with their image, kind (ground-truth object, or a model's false positive)
    and box, read from SQL (Project.objects keeps them in a column file until the next import)."""
    frame = read_frame(connection, f"SELECT id, {', '.join(OBJECT_COLUMNS)} FROM samples WHERE object_kind IS NOT NULL "
                                   "ORDER BY id", index_col="id")
    return _numeric(frame)


def read_outcome_rows(connection: Connection, model_id: int) -> pd.DataFrame:
    """A model's outcome per object sample (index: sample id): outcome, TIDE error type, IoU, predicted box, ..."""
    frame = read_frame(connection, "SELECT sample_id AS id, outcome, error_type, iou, predicted_class, pred_x, pred_y, "
                                   "pred_w, pred_h, nearest_label, keypoint_types, keypoint_similarity_json, "
                                   "pred_keypoints_json, pred_mask_json, boundary_iou FROM object_outcomes "
                                   "WHERE model_id = ?", (int(model_id),), index_col="id")
    return _numeric(frame)


def _numeric(frame: pd.DataFrame) -> pd.DataFrame:
    import pandas as pd

    for column in NUMERIC_OBJECT_COLUMNS.intersection(frame.columns):  # a column no row fills comes back as None:
        frame[column] = pd.to_numeric(frame[column], errors="coerce")  # every reader gets NaN for "none"
    return frame


# Geometry and overlaps: numbers wherever they are read (NaN where there is none, e.g. a model that found nothing).
NUMERIC_OBJECT_COLUMNS = frozenset({"box_x", "box_y", "box_w", "box_h", "iou", "pred_x", "pred_y", "pred_w", "pred_h",
                                    "boundary_iou"})


def object_evaluation(engine, model: str, split: str | None = None) -> dict | None:
    """A model's COCO evaluation of one import's ground truth (the newest one holding `split`, or of any split):
    import_id, splits, settings, summary (COCO's 12 numbers), per_class (AP per class) and fixes (a pose model's
    AP if each error type were fixed, else None); None for a model without one (an image classifier)."""
    import pandas as pd

    with read_connection(engine) as connection:
        rows = connection.execute(
            text("SELECT e.import_id, e.splits, e.settings_json, e.summary_json, e.per_class_json, e.fixes_json "
                 "FROM object_evaluations e JOIN models m ON m.id = e.model_id WHERE m.name = :m "
                 "ORDER BY e.import_id DESC"), {"m": model}).all()
    row = next((r for r in rows if split is None or split in r[1].split(",")), None)
    if row is None:
        return None
    return {"import_id": int(row[0]), "splits": row[1].split(","), "settings": json.loads(row[2]),
            "summary": json.loads(row[3]), "per_class": pd.DataFrame(json.loads(row[4])),
            "fixes": pd.DataFrame(json.loads(row[5])) if row[5] else None}


def match_settings(engine) -> dict:
    """How the newest object import matched its results (objects.matching.Matches.settings); empty for images."""
    with read_connection(engine) as connection:
        row = connection.execute(text("SELECT settings_json FROM object_evaluations ORDER BY import_id DESC "
                                      "LIMIT 1")).first()
    return json.loads(row[0]) if row else {}


def keypoint_skeleton(engine) -> dict:
    """The skeleton people were imported with (newest import first): keypoint `names` and `limbs` (index pairs);
    empty for boxes."""
    with read_connection(engine) as connection:
        for (settings,) in connection.execute(
                text("SELECT settings_json FROM object_evaluations ORDER BY import_id DESC")):
            stated = json.loads(settings)
            if stated.get("keypoint_names"):
                return {"names": list(stated["keypoint_names"]),
                        "limbs": [(int(a), int(b)) for a, b in stated.get("limbs", [])]}
    return {}


def coco_summaries(engine) -> dict[str, dict[str, float]]:
    """Each model's COCO summary per import, keyed "model (splits)"; where a model has several evaluations of the
    same splits (a project imported in parts, each part evaluated by COCO on its own: their APs do not add up to the
    project's), each is keyed "model (import #N; splits)" instead of one silently standing for all."""
    with read_connection(engine) as connection:
        rows = connection.execute(text("SELECT m.name, e.import_id, e.splits, e.summary_json FROM object_evaluations e "
                                       "JOIN models m ON m.id = e.model_id ORDER BY m.id, e.import_id")).all()
    repeated = collections.Counter((name, splits) for name, _, splits, _ in rows)
    return {(f"{name} ({splits})" if repeated[(name, splits)] == 1 else f"{name} (import #{import_id}; {splits})"):
            json.loads(summary) for name, import_id, splits, summary in rows}


def evaluations_per_import(engine, model: str, split: str) -> pd.DataFrame:
    """A model's COCO evaluations of every import holding `split`, newest first: import, splits, objects (those COCO
    counts, every class) and the summary's figures (AP, AP50, ...): one row per import evaluated on its own."""
    import pandas as pd

    with read_connection(engine) as connection:
        rows = connection.execute(
            text("SELECT e.import_id, e.splits, e.summary_json, e.per_class_json FROM object_evaluations e "
                 "JOIN models m ON m.id = e.model_id WHERE m.name = :m ORDER BY e.import_id DESC"), {"m": model}).all()
    table = [{"import": int(import_id), "splits": splits,
              "objects": int(sum(row.get("objects", 0) for row in json.loads(per_class))), **json.loads(summary)}
             for import_id, splits, summary, per_class in rows if split in splits.split(",")]
    return pd.DataFrame(table)
