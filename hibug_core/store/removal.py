"""Removing samples from a project (an image that turned out unreadable, a row imported by mistake), so that no
sample can leave a project stuck: every row that names them goes with them, in one transaction."""
from __future__ import annotations

import numpy as np
from sqlalchemy import Connection, text

from hibug_core.errors import ProjectError
from hibug_core.metrics import judged
from hibug_core.store.audit import author_name, now
from hibug_core.store.audit import record as record_audit
from hibug_core.store.db import in_chunks, read_connection, write_transaction
from hibug_core.store.split_counts import add_split_counts

# Every table whose rows name a sample (sample_id), cleared before the samples themselves.
SAMPLE_TABLES = ("predictions", "object_outcomes", "tag_corrections", "mllm_answers",
                 "generated_images")
CHUNK = 500  # sample ids per statement (SQLite's and PostgreSQL's limits on parameters stay far away)


def samples_of_images(project, sample_ids) -> np.ndarray:
    """The given samples and every other sample of their images (the objects and false positives beside them): what
    goes when an image goes."""
    with read_connection(project.engine) as connection:
        rows = connection.execute(text("SELECT id, root_id, path FROM samples")).all()
    chosen = set(int(i) for i in sample_ids)
    images = {(root, path) for i, root, path in rows if i in chosen}
    return np.array(sorted(i for i, root, path in rows if (root, path) in images), dtype=np.int64)


def unreadable_samples(project, *, progress=None) -> tuple[np.ndarray, list[str]]:
    """(the samples whose image the image loader cannot decode, with every other sample of those images; each such
    image's path and why), every distinct image decoded once."""
    from hibug_core.image_loader import ImageUnreadable, open_image

    samples = project.samples()
    paths = samples["image_path"].drop_duplicates()
    bad, why = [], []
    for done, (sample_id, path) in enumerate(paths.items(), start=1):
        try:
            open_image(path).load()
        except (ImageUnreadable, OSError, ValueError) as error:
            bad.append(sample_id)
            why.append(f"{path}: {error}")
        if progress is not None and (done % 256 == 0 or done == len(paths)):
            progress("reading images", done, len(paths))
    return samples_of_images(project, bad), why


def remove_samples(project, sample_ids, *, reason: str, author: str | None = None) -> int:
    """Remove the samples `sample_ids` and everything stored of them (model outputs, tags, corrections, answers,
    outcomes); each model's per-split score is brought up to date. Tagging runs and embeddings kept in array files,
    and imported tags kept as columns, keep their entries, which nothing reads any more. Recorded in the audit log
    with `reason`; returns how many went. ProjectError when one is not in the project (nothing is removed)."""
    ids = np.unique(np.asarray(list(sample_ids), dtype=np.int64))
    if not len(ids):
        return 0
    author = author_name(author)
    with write_transaction(project.engine) as connection:
        # 1. Every sample is there.
        found = _existing(connection, ids)
        if len(found) != len(ids):
            missing = sorted(set(ids.tolist()) - set(found))
            raise ProjectError(f"no sample with id {missing[0]} in this project ({len(missing)} of the "
                               f"{len(ids)} given are not); nothing was removed")
        # 2. The models' per-split scores and the split counts without them, then every row naming them, then the
        # samples.
        _subtract_scores(connection, ids)
        add_split_counts(connection, list(found.values()), sign=-1)
        for table in (*SAMPLE_TABLES, "samples"):
            column = "id" if table == "samples" else "sample_id"
            for listed, params in in_chunks(ids, CHUNK):
                connection.execute(text(f"DELETE FROM {table} WHERE {column} IN {listed}"), params)
        # 3. Said: an entry of the audit log, and a new version of the tables imports change (their caches).
        connection.execute(text("INSERT INTO imports (source, kind, n_rows, author, created_at) "
                                "VALUES (:s, 'removal', :n, :a, :t)"),
                           {"s": reason, "n": -len(ids), "a": author, "t": now()})
        record_audit(connection, author, "remove samples", f"samples:{len(ids)}", None,
                     {"reason": reason, "samples": ids[:100].tolist()})
    return len(ids)


def _existing(connection: Connection, ids: np.ndarray) -> dict[int, str]:
    """The split of each of these samples that the project holds, by id."""
    found = {}
    for listed, params in in_chunks(ids, CHUNK):
        found.update((int(i), split) for i, split in connection.execute(
            text(f"SELECT id, split FROM samples WHERE id IN {listed}"), params))
    return found


def _subtract_scores(connection: Connection, ids: np.ndarray) -> None:
    """Take the removed samples' outputs out of each model's per-split count and sum of scores (model_split_scores,
    which hibug info and the Overview read), as the writers of predictions add them."""
    import pandas as pd

    parts = []
    for listed, params in in_chunks(ids, CHUNK):
        parts.append(pd.read_sql_query(text(
            "SELECT p.model_id, s.split, s.label, p.score FROM predictions p JOIN samples s ON s.id = p.sample_id "
            f"WHERE p.sample_id IN {listed}"), connection, params=params))
    rows = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if rows.empty:
        return
    rows = rows[judged(rows["label"], rows["score"])]
    for (model_id, split), group in rows.groupby(["model_id", "split"]):
        connection.execute(text("UPDATE model_split_scores SET n = n - :n, score_sum = score_sum - :t "
                                "WHERE model_id = :m AND split = :s"),
                           {"n": len(group), "t": float(group["score"].astype(float).sum()), "m": int(model_id),
                            "s": split})
