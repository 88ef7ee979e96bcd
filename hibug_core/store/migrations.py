"""Versioned schema migrations: each project database records which versions it has applied."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, inspect, text

from hibug_core.access import SYSTEM, acting_as
from hibug_core.errors import ProjectError
from hibug_core.metrics import BACKGROUND
from hibug_core.store import known_tag_columns
from hibug_core.store.audit import now
from hibug_core.store.db import write_transaction


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    statements: tuple[str, ...] = ()
    run: Callable[[Connection], None] | None = None


def _auto_id(connection: Connection) -> str:
    return "INTEGER PRIMARY KEY AUTOINCREMENT" if connection.dialect.name == "sqlite" else "BIGSERIAL PRIMARY KEY"


V1_STATEMENTS = (
    "CREATE TABLE project_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE data_roots (id {auto_id}, path TEXT NOT NULL UNIQUE)",
    """CREATE TABLE imports (
        id {auto_id}, source TEXT NOT NULL, kind TEXT NOT NULL, n_rows INTEGER NOT NULL,
        author TEXT NOT NULL, created_at TEXT NOT NULL)""",
    """CREATE TABLE samples (
        id {auto_id}, sample_key TEXT NOT NULL UNIQUE,
        root_id INTEGER NOT NULL REFERENCES data_roots(id), path TEXT NOT NULL,
        content_hash TEXT NOT NULL, width INTEGER NOT NULL, height INTEGER NOT NULL,
        label TEXT, split TEXT NOT NULL, import_id INTEGER NOT NULL REFERENCES imports(id))""",
    "CREATE INDEX ix_samples_split ON samples (split)",
    "CREATE INDEX ix_samples_hash ON samples (content_hash)",
    """CREATE TABLE models (
        id {auto_id}, name TEXT NOT NULL UNIQUE, classes_json TEXT, created_at TEXT NOT NULL)""",
    """CREATE TABLE predictions (
        model_id INTEGER NOT NULL REFERENCES models(id), sample_id INTEGER NOT NULL REFERENCES samples(id),
        prediction TEXT NOT NULL, confidence DOUBLE PRECISION, score DOUBLE PRECISION,
        PRIMARY KEY (model_id, sample_id))""",
    """CREATE TABLE known_tags (
        attribute TEXT NOT NULL, sample_id INTEGER NOT NULL REFERENCES samples(id), tag TEXT NOT NULL,
        PRIMARY KEY (attribute, sample_id))""",
    """CREATE TABLE audit_log (
        id {auto_id}, at TEXT NOT NULL, actor TEXT NOT NULL, action TEXT NOT NULL, entity TEXT NOT NULL,
        before_json TEXT, after_json TEXT)""",
)

V2_STATEMENTS = (
    """CREATE TABLE attribute_schemas (
        version {auto_id}, schema_json TEXT NOT NULL, author TEXT NOT NULL, created_at TEXT NOT NULL,
        note TEXT NOT NULL)""",
    """CREATE TABLE tag_runs (
        id {auto_id}, method TEXT NOT NULL, encoder TEXT, schema_version INTEGER REFERENCES attribute_schemas(version),
        attributes_json TEXT NOT NULL, array_name TEXT, status TEXT NOT NULL, n_samples INTEGER NOT NULL,
        message TEXT, author TEXT NOT NULL, created_at TEXT NOT NULL, finished_at TEXT)""",
    """CREATE TABLE tag_corrections (
        id {auto_id}, attribute TEXT NOT NULL, sample_id INTEGER NOT NULL REFERENCES samples(id), tag TEXT,
        kind TEXT NOT NULL, actor TEXT NOT NULL, at TEXT NOT NULL)""",
    "CREATE INDEX ix_tag_corrections ON tag_corrections (attribute, sample_id)",
    """CREATE TABLE mllm_answers (
        run_id INTEGER NOT NULL REFERENCES tag_runs(id), sample_id INTEGER NOT NULL REFERENCES samples(id),
        answer_json TEXT, error TEXT, PRIMARY KEY (run_id, sample_id))""",
)

V3_STATEMENTS = (
    """CREATE TABLE jobs (
        id {auto_id}, kind TEXT NOT NULL, params_json TEXT NOT NULL, status TEXT NOT NULL,
        stage TEXT, done INTEGER NOT NULL DEFAULT 0, total INTEGER NOT NULL DEFAULT 0, message TEXT, error TEXT,
        result_json TEXT, cancel_requested INTEGER NOT NULL DEFAULT 0, resumed_from INTEGER, pid INTEGER,
        host TEXT, author TEXT NOT NULL, created_at TEXT NOT NULL, started_at TEXT, heartbeat_at TEXT,
        finished_at TEXT)""",
    "CREATE INDEX ix_jobs_kind_status ON jobs (kind, status)",
)

V4_STATEMENTS = (
    """CREATE TABLE repair_runs (
        id {auto_id}, kind TEXT NOT NULL, params_json TEXT NOT NULL, result_json TEXT, author TEXT NOT NULL,
        created_at TEXT NOT NULL)""",
    """CREATE TABLE generated_images (
        sample_id INTEGER PRIMARY KEY REFERENCES samples(id), run_id INTEGER NOT NULL REFERENCES repair_runs(id),
        prompt TEXT NOT NULL, slice_id TEXT, generator TEXT NOT NULL, seed INTEGER NOT NULL)""",
)

V5_STATEMENTS = (
    """CREATE TABLE reviews (
        id {auto_id}, target_kind TEXT NOT NULL, target_key TEXT NOT NULL, title TEXT NOT NULL, definition_json TEXT,
        status TEXT NOT NULL, assignee TEXT, version INTEGER NOT NULL, created_by TEXT NOT NULL,
        created_at TEXT NOT NULL, updated_by TEXT NOT NULL, updated_at TEXT NOT NULL,
        UNIQUE (target_kind, target_key))""",
    """CREATE TABLE review_comments (
        id {auto_id}, review_id INTEGER NOT NULL REFERENCES reviews(id), author TEXT NOT NULL, body TEXT NOT NULL,
        created_at TEXT NOT NULL)""",
    "CREATE INDEX ix_review_comments ON review_comments (review_id)",
    """CREATE TABLE saved_views (
        id {auto_id}, name TEXT NOT NULL UNIQUE, page TEXT NOT NULL, query_json TEXT NOT NULL, author TEXT NOT NULL,
        created_at TEXT NOT NULL)""",
)

V9_STATEMENTS = (
    *(f"ALTER TABLE samples ADD COLUMN {column}" for column in (
        "image_key TEXT", "object_kind TEXT", "owner TEXT", "box_x DOUBLE PRECISION", "box_y DOUBLE PRECISION",
        "box_w DOUBLE PRECISION", "box_h DOUBLE PRECISION", "keypoints_json TEXT")),
    """CREATE TABLE object_outcomes (
        model_id INTEGER NOT NULL REFERENCES models(id), sample_id INTEGER NOT NULL REFERENCES samples(id),
        outcome TEXT NOT NULL, error_type TEXT, iou DOUBLE PRECISION, predicted_class TEXT, pred_x DOUBLE PRECISION,
        pred_y DOUBLE PRECISION, pred_w DOUBLE PRECISION, pred_h DOUBLE PRECISION, nearest_label TEXT,
        PRIMARY KEY (model_id, sample_id))""",
    """CREATE TABLE object_evaluations (
        model_id INTEGER NOT NULL REFERENCES models(id), import_id INTEGER NOT NULL REFERENCES imports(id),
        splits TEXT NOT NULL, settings_json TEXT NOT NULL, summary_json TEXT NOT NULL, per_class_json TEXT NOT NULL,
        created_at TEXT NOT NULL, PRIMARY KEY (model_id, import_id))""",
)

def _state_the_task(connection: Connection) -> None:
    """A project imported before tasks were stored explicitly gets the one its samples were imported as (objects with
    keypoints: pose; objects: detection; images: classification); one with nothing imported keeps none."""
    if connection.execute(text("SELECT 1 FROM project_meta WHERE key = 'task'")).first() is not None:
        return
    if connection.execute(text("SELECT 1 FROM samples WHERE keypoints_json IS NOT NULL LIMIT 1")).first():
        task = "pose"
    elif connection.execute(text("SELECT 1 FROM samples WHERE object_kind IS NOT NULL LIMIT 1")).first():
        task = "detection"
    elif connection.execute(text("SELECT 1 FROM samples LIMIT 1")).first():
        task = "classification"
    else:
        return
    connection.execute(text("INSERT INTO project_meta (key, value) VALUES ('task', :v)"), {"v": task})


def _add_columns(connection: Connection, columns: dict[str, tuple[str, ...]]) -> None:
    """ALTER TABLE ... ADD COLUMN for each column a table lacks, so the migration may run again safely (a project
    whose record of it was lost, as a copy restored from its database file alone)."""
    for table, wanted in columns.items():
        present = {column["name"] for column in inspect(connection).get_columns(table)}
        for column in wanted:
            if column.split()[0] not in present:
                connection.execute(text(f"ALTER TABLE {table} ADD COLUMN {column}"))


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "samples, predictions, known tags, imports, audit log", V1_STATEMENTS),
    Migration(2, "attribute schema versions, tag runs, tag corrections, multimodal-LLM answers", V2_STATEMENTS),
    Migration(3, "background jobs with their progress", V3_STATEMENTS),
    Migration(4, "repair runs and generated images with their prompts", V4_STATEMENTS),
    Migration(5, "slice reviews with comments, and saved views", V5_STATEMENTS),
    Migration(6, "the images of a reviewed selection", ("ALTER TABLE reviews ADD COLUMN members_json TEXT",)),
    Migration(7, "which tag source is in force per attribute, chosen by a person",
              ("""CREATE TABLE tag_source_choices (
                  id {auto_id}, attribute TEXT NOT NULL, source TEXT NOT NULL, actor TEXT NOT NULL,
                  at TEXT NOT NULL)""",)),
    Migration(8, "per model and split, the count and sum of scores (kept by the writers of predictions, read by "
                 "hibug info and the Overview without scanning every prediction)",
              ("""CREATE TABLE model_split_scores (
                  model_id INTEGER NOT NULL REFERENCES models(id), split TEXT NOT NULL, n INTEGER NOT NULL,
                  score_sum DOUBLE PRECISION, PRIMARY KEY (model_id, split))""",
               """INSERT INTO model_split_scores (model_id, split, n, score_sum)
                  SELECT p.model_id, s.split, COUNT(p.score), SUM(p.score) FROM predictions p
                  JOIN samples s ON s.id = p.sample_id GROUP BY p.model_id, s.split""")),
    Migration(9, "objects: a sample may be a box in an image (ground-truth object or a model's false positive), with "
                 "each model's outcome and TIDE error type per object and its COCO evaluation", V9_STATEMENTS),
    Migration(10, "no index on image content hashes (no query reads by hash; building it took most of a million-row "
                  "import's indexing)", ("DROP INDEX IF EXISTS ix_samples_hash",)),
    Migration(11, "every project states its task (classification, detection or pose); object samples are found by an "
                  "index of their own",
              ("CREATE INDEX IF NOT EXISTS ix_samples_objects ON samples (id) WHERE object_kind IS NOT NULL",),
              _state_the_task),
    Migration(12, "people: each model's type and similarity of every keypoint (Ronchi and Perona's), its predicted "
                  "skeleton, and per evaluation the AP if each error type were fixed",
              run=lambda connection: _add_columns(connection, {
                  "object_outcomes": ("keypoint_types TEXT", "keypoint_similarity_json TEXT",
                                      "pred_keypoints_json TEXT"),
                  "object_evaluations": ("fixes_json TEXT",)})),
    Migration(13, "a model's score per split counts true samples only: an object model's false positives (label "
                  "'(background)') are counted apart, not as failures of the true objects",
              ("DELETE FROM model_split_scores",
               f"""INSERT INTO model_split_scores (model_id, split, n, score_sum)
                  SELECT p.model_id, s.split, COUNT(p.score), SUM(p.score) FROM predictions p
                  JOIN samples s ON s.id = p.sample_id
                  WHERE s.label IS NOT NULL AND s.label <> '{BACKGROUND}' GROUP BY p.model_id, s.split""")),
    Migration(14, "masks: an object's true mask (or a false positive's own), and per model the mask that went with "
                  "each object and the Boundary IoU of the two",
              run=lambda connection: _add_columns(connection, {
                  "samples": ("mask_json TEXT",),
                  "object_outcomes": ("pred_mask_json TEXT", "boundary_iou DOUBLE PRECISION")})),
    Migration(15, "objects: each labelled image's crowd regions as its ground truth gave them (a model added later is "
                  "matched against the same truth); per model a digest of its outputs (the same outputs under two "
                  "names are told)",
              ("CREATE TABLE IF NOT EXISTS truth_images (image_key TEXT PRIMARY KEY, crowd_json TEXT NOT NULL)",),
              lambda connection: _add_columns(connection, {"models": ("outputs_digest TEXT",)})),
    Migration(16, "imported tags stored as columns (per import and attribute, the tagged samples and a code per tag), "
                  "not one row per tag: ten million objects with fifty tags are fifty rows",
              run=known_tag_columns.from_rows),
    Migration(17, "the samples per split, kept by the import and the removal of samples (`hibug info` counted them in "
                  "0.7 s at ten million objects)",
              ("CREATE TABLE IF NOT EXISTS split_counts (split TEXT PRIMARY KEY, n INTEGER NOT NULL)",
               "DELETE FROM split_counts",  # counted again whole when run again
               "INSERT INTO split_counts (split, n) SELECT split, COUNT(*) FROM samples GROUP BY split")),
)
LATEST_VERSION = MIGRATIONS[-1].version


def applied_versions(engine: Engine) -> list[int]:
    if not inspect(engine).has_table("schema_migrations"):
        return []
    with engine.connect() as connection:
        return [row[0] for row in connection.execute(text("SELECT version FROM schema_migrations ORDER BY version"))]


def migrate(engine: Engine) -> list[int]:
    """Apply every pending migration, each in its own transaction; returns the versions applied now.

    Safe when several processes open the same project at once: the check runs inside the write lock.
    """
    with acting_as(SYSTEM):  # whoever opens an older project, hibug itself upgrades it
        return _migrate(engine)


def _migrate(engine: Engine) -> list[int]:
    applied_now: list[int] = []
    with write_transaction(engine) as connection:
        connection.execute(
            text(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL)"
            )
        )
    for migration in MIGRATIONS:
        with write_transaction(engine) as connection:
            done = {row[0] for row in connection.execute(text("SELECT version FROM schema_migrations"))}
            newest = max(done, default=0)
            if newest > LATEST_VERSION:
                raise ProjectError(
                    f"this project's database is at schema version {newest}, newer than this hibug "
                    f"understands ({LATEST_VERSION}); upgrade hibug to open it"
                )
            if migration.version in done:
                continue
            auto_id = _auto_id(connection)
            for statement in migration.statements:
                connection.execute(text(statement.format(auto_id=auto_id)))
            if migration.run is not None:
                migration.run(connection)
            connection.execute(
                text("INSERT INTO schema_migrations (version, description, applied_at) VALUES (:v, :d, :t)"),
                {"v": migration.version, "d": migration.description, "t": now()},
            )
            applied_now.append(migration.version)
    return applied_now
