"""A hibug project: one folder with a SQL store for samples and edits, and bulk arrays and column files beside it."""
# pandas and pyarrow are imported by the functions that use them: `hibug info` answers without them (they are a
# third of its time).
from __future__ import annotations

import collections
import contextlib
import functools
import json
import logging
import os
import uuid
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from sqlalchemy import Connection, bindparam, text

from hibug_core.access import Role, require
from hibug_core.cache import BoundedCache
from hibug_core.config import IngestConfig, StoreConfig
from hibug_core.errors import Issues, ManifestError, ProjectError, RowIssue
from hibug_core.metrics import judged
from hibug_core.store import known_tag_columns, object_store
from hibug_core.store.arrays import ArrayStore
from hibug_core.store.audit import NOT_DATA, author_name, now
from hibug_core.store.audit import record as record_audit
from hibug_core.store.column_files import ColumnFiles
from hibug_core.store.db import (
    in_chunks,
    insert_columns,
    keys_checked_at_end,
    make_engine,
    read_connection,
    sql_values,
    sqlite_url,
    write_transaction,
)
from hibug_core.store.integrity import check_sqlite_file, pending_migrations
from hibug_core.store.location import DB_FILE, LINK_FILE, linked_url, project_file, reaching, write_link
from hibug_core.store.migrations import LATEST_VERSION, migrate
from hibug_core.store.row_blocks import read_columns
from hibug_core.store.split_counts import add_split_counts, read_split_counts
from hibug_core.store.staging import staged_folder

if TYPE_CHECKING:
    import pandas as pd

logger = logging.getLogger(__name__)

SAMPLE_INDEXES = {"ix_samples_split": "samples (split)",  # migrations v1 and v11
                  "ix_samples_objects": "samples (id) WHERE object_kind IS NOT NULL"}
KEYED_IMPORT_TABLES = ("samples", "predictions")  # the tables an import fills, with foreign keys
REAL_ROOTS = BoundedCache("data roots, resolved", max_items=16)
IMPORT_TABLES = BoundedCache("import tables", max_items=8)  # samples, known tags, a few models' predictions
# The SQLite files a Project of this process has open. Their header is checked on the first open only: reading it
# again with a plain open() and closing that file would drop every lock SQLite holds on it in this process (POSIX
# locks are per process), and another process (a job's worker) could then take this one's WAL for unused and delete it.
OPEN_DATABASES: collections.Counter = collections.Counter()
OPEN_PROJECTS: weakref.WeakSet = weakref.WeakSet()  # every Project not closed yet (a test harness closes leftovers)
ARRAYS_DIR = "arrays"
MEASURES_META = "measured_with"  # the bins its measured tags were computed with (ValidatedManifest.measured_with)
COLUMNS_DIR = "columns"  # column_files.ColumnFiles: tables only an import changes, as Arrow files


def data_roots(folders: list[Path]) -> dict[Path, Path]:
    """Each image folder's data root: the folder itself, or the outermost of the image folders that holds it. Never a
    common ancestor that holds no image of its own (images under /data/a and /mnt/b must not make / a data root)."""
    root_of: dict[Path, Path] = {}
    current: Path | None = None
    for folder in sorted(set(folders), key=lambda f: f.parts):
        if current is None or not folder.is_relative_to(current):
            current = folder
        root_of[folder] = current
    return root_of


@dataclass(frozen=True)
class ImportSummary:
    import_id: int | None  # None: only model outputs were added to samples already there
    rows: int
    models: list[str]
    attributes: list[str]
    ignored_columns: list[str]
    warnings: list[str] = field(default_factory=list)  # kept as given, but perhaps a mistake


def _refuse_a_used_database(engine) -> None:
    """ProjectError when a PostgreSQL database already holds tables: a project's database is its own."""
    from sqlalchemy import inspect

    tables = inspect(engine).get_table_names()
    if tables:
        held = "a hibug project" if "project_meta" in tables else f"{len(tables)} tables"
        raise ProjectError(f"the database {engine.url.database} already holds {held}; give an empty database for a "
                           "new project (CREATE DATABASE), or open the project whose folder names it")


def _drop_every_table(engine) -> None:
    """Remove what a failed creation made in its (empty before) PostgreSQL database."""
    from sqlalchemy import inspect

    with engine.begin() as connection:
        for table in inspect(connection).get_table_names():
            connection.execute(text(f'DROP TABLE IF EXISTS "{table}" CASCADE'))


class Project:
    """Open with Project.open(folder); create with Project.create(folder) or Project.create_from_manifest()."""

    def __init__(self, folder: Path, *, db_url: str | None = None, config: StoreConfig = StoreConfig(),
                 read_only: bool = False, column_files_writable: bool | None = None):
        self.folder = Path(folder).resolve()
        self.config = config
        self.read_only = read_only
        self.db_url = db_url or sqlite_url(self.folder / DB_FILE, read_only=read_only)
        self.engine = make_engine(self.db_url, config)
        self._database = None if db_url else os.path.realpath(self.folder / DB_FILE)
        if self._database:
            OPEN_DATABASES[self._database] += 1
        self.arrays = ArrayStore(self.folder / ARRAYS_DIR, read_only=read_only)
        self.columns = ColumnFiles(self.folder / COLUMNS_DIR, read_only=read_only if column_files_writable is None
                                   else not column_files_writable)
        self._identity = uuid.uuid4().hex  # keys this instance's entries in IMPORT_TABLES
        OPEN_PROJECTS.add(self)
        # The folders a server lets it show files from (its data roots and projects; None: one's own machine). The
        # data roots a project's database names are its own word, so a served one is held to the server's as well.
        self.served_within: tuple[Path, ...] | None = None

    # ----- opening and creating -------------------------------------------------------------
    @classmethod
    def open(cls, folder: str | Path, *, db_url: str | None = None, read_only: bool | None = None,
             keep_column_files: bool = False) -> Project:
        """Open a project; nothing is written unless its database needs upgrading. read_only: True never writes
        (edits are refused with a message), None (default) is read-only when the folder cannot be written.
        keep_column_files: a read-only reader still keeps what it reads and computes as column files (copies of
        tables, kept reports: caches, never the database) where the folder can be written, as a writable one does:
        a command that only reads then leaves the next one its tables (at ten million objects a model's outcomes
        took a minute from SQL in every `hibug slices`)."""
        folder = Path(folder)
        database = folder / DB_FILE
        if not folder.is_dir():
            raise ProjectError(f"{folder} is {'a file' if folder.exists() else 'not there'}; give the folder of a "
                               "hibug project (made by `hibug new` or `hibug demo`)")
        writable = True
        if db_url is None and not database.exists():
            db_url = linked_url(folder)  # a team's project: its database on a PostgreSQL server
        if db_url is None:
            if not database.exists():
                raise ProjectError(f"{folder} is not a hibug project (no {DB_FILE}); create one with `hibug new`")
            writable = os.access(folder, os.W_OK) and os.access(database, os.W_OK)
            if os.path.realpath(database) not in OPEN_DATABASES:  # see OPEN_DATABASES
                check_sqlite_file(database, writable=writable and read_only is not True)
            probe = make_engine(sqlite_url(database.resolve(), read_only=True))  # looked at before any write
            try:
                pending = pending_migrations(probe)
            finally:
                probe.dispose()
            if pending and writable:  # an older project is upgraded first, even when only reading is asked
                upgrade = make_engine(sqlite_url(database.resolve()))
                try:
                    migrate(upgrade)
                finally:
                    upgrade.dispose()
                pending = set()
        read_only = not writable if read_only is None else read_only
        keeps = keep_column_files and os.access(folder, os.W_OK) and (
            not (folder / COLUMNS_DIR).exists() or os.access(folder / COLUMNS_DIR, os.W_OK))
        project = cls(folder, db_url=db_url, read_only=read_only, column_files_writable=True if keeps else None)
        try:
            if db_url is not None:
                with reaching(db_url):
                    pending = pending_migrations(project.engine)
            if pending and project.read_only:
                raise ProjectError(f"{folder} was made by an older hibug and needs upgrading (schema versions "
                                   f"{sorted(pending)}), which cannot be done where it cannot be written; open it "
                                   "once where it can be")
            if pending:
                migrate(project.engine)
            if not project.read_only:
                project.arrays.remove_leftovers()
                project.columns.remove_leftovers()
        except BaseException:
            project.close()
            raise
        return project

    @classmethod
    def create(cls, folder: str | Path, *, name: str | None = None, db_url: str | None = None) -> Project:
        require(Role.ADMIN, "create a project")
        folder = Path(folder)
        if project_file(folder):
            raise ProjectError(f"{folder} already holds a hibug project; open it, or choose another folder")
        folder.mkdir(parents=True, exist_ok=True)
        project = cls(folder, db_url=db_url)
        on_server = project.engine.dialect.name == "postgresql"
        try:
            if on_server:
                with reaching(db_url):
                    _refuse_a_used_database(project.engine)
            try:
                if on_server:
                    write_link(folder, db_url)
                migrate(project.engine)
                with write_transaction(project.engine) as connection:
                    for key, value in {"name": name or folder.resolve().name, "created_at": now()}.items():
                        connection.execute(text("INSERT INTO project_meta (key, value) VALUES (:k, :v)"),
                                           {"k": key, "v": value})
            except BaseException:
                if on_server:  # what this creation made, in a database it found empty
                    (folder / LINK_FILE).unlink(missing_ok=True)
                    _drop_every_table(project.engine)
                raise
        except BaseException:  # e.g. a full disk: no connection is left holding the half-made database open
            project.close()
            raise
        return project

    @classmethod
    def delete(cls, folder: str | Path) -> None:
        """Remove a project's folder and everything in it (its images, kept outside it, stay)."""
        require(Role.ADMIN, "delete a project")
        folder = Path(folder)
        found = project_file(folder)
        if found is None or not found.is_file():
            raise ProjectError(f"{folder} is not a hibug project (no {DB_FILE}); nothing was removed")
        import shutil

        url = linked_url(folder)
        if url is not None:  # its tables go with it, as a SQLite project's file does
            engine = make_engine(url)
            try:
                with reaching(url):
                    _drop_every_table(engine)
            finally:
                engine.dispose()

        shutil.rmtree(folder)

    @classmethod
    def create_from_manifest(cls, folder: str | Path, manifest, *, name: str | None = None,
                             author: str | None = None, db_url: str | None = None) -> Project:
        """Create a project and import a validated manifest; on any failure no folder is left behind (nor, with a
        PostgreSQL `db_url`, any table in that database)."""
        require(Role.ADMIN, "create a project")
        folder = Path(folder).resolve()
        if folder.exists() and any(folder.iterdir()):
            raise ProjectError(f"{folder} exists and is not empty; choose a new folder for the project")
        with staged_folder(folder, "creating") as staging:
            project = cls.create(staging, name=name or folder.name, db_url=db_url)
            try:
                project.import_manifest(manifest, author=author, private=True)
            except BaseException:
                if project.engine.dialect.name == "postgresql":
                    _drop_every_table(project.engine)  # the database was empty before (create refuses a used one)
                raise
            finally:
                project.close()
        return cls.open(folder)

    def close(self) -> None:
        self.engine.dispose()
        OPEN_PROJECTS.discard(self)
        if self._database and OPEN_DATABASES[self._database] > 0:
            OPEN_DATABASES[self._database] -= 1
            if not OPEN_DATABASES[self._database]:
                del OPEN_DATABASES[self._database]
            self._database = None

    def __enter__(self) -> Project:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ----- writing ----------------------------------------------------------------------------
    def _root_id(self, connection: Connection, root: Path) -> int:
        stored = os.path.relpath(root, self.folder) if root.is_relative_to(self.folder) else str(root)
        stored = Path(stored).as_posix()
        row = connection.execute(text("SELECT id FROM data_roots WHERE path = :p"), {"p": stored}).first()
        if row:
            return int(row[0])
        connection.execute(text("INSERT INTO data_roots (path) VALUES (:p)"), {"p": stored})
        return int(connection.execute(text("SELECT id FROM data_roots WHERE path = :p"), {"p": stored}).scalar_one())

    def import_manifest(self, manifest, *, author: str | None = None, kind: str = "manifest",
                        also=None, private: bool = False, models_only: bool = False,
                        note: dict | None = None) -> ImportSummary:
        """Add a validated manifest's rows in one transaction: all rows land, or none and nothing changes.
        also(connection, {sample key: id}) writes what belongs with the rows inside the same transaction. `private`:
        no other process can open the project (one being created in its staging folder). `models_only`: see
        add_model_outputs; `note`: what the audit log keeps of where its models come from."""
        import pandas as pd

        author = author_name(author)
        samples = manifest.samples
        if samples.empty:  # every source refuses this itself; here for any that does not
            raise ManifestError(manifest.source, [RowIssue(None, None, "nothing to import: it has no rows")])
        keys = samples["sample_key"].to_numpy(object)
        # Data roots and relative paths once per distinct image.
        path_codes, distinct_text = pd.factorize(samples["image_path"].to_numpy(object))
        distinct = [Path(p) for p in distinct_text]
        root_of = data_roots([p.parent for p in distinct])
        roots = [root_of[p.parent] for p in distinct]
        relative = np.array([p.relative_to(r).as_posix() for p, r in zip(distinct, roots)], dtype=object)
        with self.arrays.publishing() as staged:
            bulk = len(keys) >= self.config.bulk_rows
            with write_transaction(self.engine, bulk=bulk, private=private) as connection, \
                    contextlib.ExitStack() as loading:
                if models_only:
                    stored = pd.read_sql_query(text(
                        f"SELECT id, sample_key, label, split, object_kind, owner, image_key, {TRUTH_COLUMNS} "
                        "FROM samples"), connection, index_col="sample_key")
                    positions = pd.Index(stored.index).get_indexer(keys)
                    already = {name: set(read_columns(  # the samples each model has outputs on already
                        connection, "SELECT p.sample_id FROM predictions p JOIN models m ON m.id = p.model_id "
                        "WHERE m.name = ?", (name,))["sample_id"].tolist()) for name in manifest.models}
                    found = _outputs_only_issues(manifest, stored, positions, already)
                    _crowd_issues(connection, manifest, found)
                    if found.items:
                        raise ManifestError(manifest.source, sorted(found.items, key=lambda x: x.row or 0),
                                            found=found)
                    new = positions < 0  # an object model's own false positives: samples of their own
                    existing = stored["id"]
                else:
                    existing = _stored_import_ids(connection, keys)
                    clashes = np.flatnonzero(pd.Index(existing.index).get_indexer(keys) >= 0) if len(existing) \
                        else []
                    if len(clashes):
                        found = Issues(IngestConfig().max_issues)
                        found.add_rows(clashes, manifest.key_column, lambda i: (
                            f"'{keys[i]}' is already in the project (import #{existing[keys[i]]})"))
                        raise ManifestError(manifest.source, found.items, found=found)
                    new = None  # every row is new
                n_stored = int(connection.execute(text("SELECT COUNT(*) FROM samples")).scalar_one())
                if bulk and (private or n_stored == 0):  # a project's first rows: nobody reads these tables yet
                    loading.enter_context(keys_checked_at_end(connection, KEYED_IMPORT_TABLES))
                added = len(keys) if new is None else int(new.sum())
                connection.execute(
                    text("INSERT INTO imports (source, kind, n_rows, author, created_at) VALUES (:s, :k, :n, :a, :t)"),
                    {"s": manifest.source, "k": kind, "n": added, "a": author, "t": now()})
                import_id = int(connection.execute(text("SELECT MAX(id) FROM imports")).scalar_one())
                root_ids = {root: self._root_id(connection, root) for root in set(roots)}
                # A large import builds the secondary indexes once after its rows (sorted, not one B-tree insert
                # per row): about twice as fast at a million rows. A small one into a big table keeps them.
                rebuilt = SAMPLE_INDEXES if added >= n_stored else {}
                for index in rebuilt:
                    connection.exec_driver_sql(f"DROP INDEX {index}")
                rows = slice(None) if new is None else np.flatnonzero(new)  # the rows inserted as samples
                objects = None if manifest.objects is None else manifest.objects.iloc[rows]
                insert_columns(connection, "samples", {
                    "sample_key": keys[rows], "root_id": np.array([root_ids[r] for r in roots])[path_codes[rows]],
                    "path": relative[path_codes[rows]], "content_hash": samples["content_hash"].to_numpy(object)[rows],
                    "width": samples["width"].to_numpy(np.int64)[rows],
                    "height": samples["height"].to_numpy(np.int64)[rows],
                    "label": sql_values(samples["label"].iloc[rows]),
                    "split": samples["split"].to_numpy(object)[rows], "import_id": import_id,
                    **object_store.object_columns(objects)}, added)
                add_split_counts(connection, samples["split"].to_numpy(object)[rows])
                for index, definition in rebuilt.items():
                    connection.exec_driver_sql(f"CREATE INDEX {index} ON {definition}")
                if new is None:
                    sample_ids = _inserted_ids(connection, import_id, keys)
                else:  # the stored samples' ids, and the new ones'
                    sample_ids = np.where(new, -1, existing.to_numpy(np.int64)[positions]).astype(np.int64)
                    sample_ids[new] = _inserted_ids(connection, import_id, keys[new])
                id_of = dict(zip(keys.tolist(), sample_ids.tolist())) if also is not None else {}
                if manifest.crowd_regions and not models_only:
                    insert_columns(connection, "truth_images", {
                        "image_key": np.array(list(manifest.crowd_regions), dtype=object),
                        "crowd_json": np.array(list(manifest.crowd_regions.values()), dtype=object)},
                        len(manifest.crowd_regions))
                warnings = []
                for name, outputs in manifest.models.items():
                    digest = _outputs_digest(samples["image_path"].to_numpy(object), outputs)
                    twin = connection.execute(text("SELECT name FROM models WHERE outputs_digest = :d AND name <> :n"),
                                              {"d": digest, "n": name}).scalar()
                    if twin is not None:
                        warnings.append(f"the outputs of '{name}' are exactly those of '{twin}' (the same results "
                                        "under two names?); compare models that differ")
                    model_id = self._model_id(connection, name, outputs.classes, digest)
                    predicted = np.array([p is not None for p in outputs.prediction], dtype=bool)  # objects: a
                    # false positive of one model has no prediction of another
                    _insert_predictions(connection, model_id, sample_ids[predicted],
                                        np.asarray(outputs.prediction, dtype=object)[predicted],
                                        outputs.confidence[predicted], outputs.score[predicted],
                                        samples["split"].to_numpy(object)[predicted],
                                        samples["label"].to_numpy(object)[predicted])
                    if name in manifest.object_evaluations:
                        object_store.insert_object_evaluation(connection, model_id, import_id, sample_ids,
                                                  sorted(set(samples["split"])), manifest.object_evaluations[name])
                    if outputs.probabilities is not None:
                        staged.stage(f"probabilities/{_safe(name)}/import-{import_id}", sample_ids=sample_ids,
                                     probabilities=outputs.probabilities, classes=np.array(outputs.classes, dtype=str))
                    if models_only:
                        record_audit(connection, author, "add model", f"model:{name}", None,
                                     {"samples": int(predicted.sum()), "source": manifest.source, **(note or {})})
                new_rows = slice(None) if new is None else np.flatnonzero(new)
                for attribute, tags in manifest.known_tags.items():  # a stored sample keeps the tags it has
                    known_tag_columns.write(connection, import_id, attribute, sample_ids[new_rows],
                                            tags[new_rows] if isinstance(tags, pd.Categorical) else
                                            np.asarray(tags, dtype=object)[new_rows])
                _set_task(connection, manifest.task)
                _set_measures(connection, manifest.measured_with)
                if also is not None:
                    also(connection, id_of)
                record_audit(connection, author, "import", f"import:{import_id}", None,
                            {"source": manifest.source, "rows": added, "models": list(manifest.models)})
        logger.info("imported %d rows from %s as import #%d", added, manifest.source, import_id)
        for warning in warnings:
            logger.warning("%s", warning)
        return ImportSummary(import_id, manifest.n_rows, list(manifest.models), list(manifest.known_tags),
                             manifest.ignored_columns, warnings)

    def add_model_outputs(self, manifest, *, author: str | None = None, note: dict | None = None) -> ImportSummary:
        """Add the models of a validated manifest whose rows are in the project already (matched by id, or by image
        where the manifest has no id), as a new version of a model is run on the same images or objects: their
        outputs are stored, and for an object model (COCO results matched with the same ground truth) its false
        positives, which are samples of their own. Every other row must be known, with the label and split stored
        for it; a model may gain outputs only on samples it has none for (a new model, or one repaired model's other
        split). Nothing is written unless all of it is."""
        return self.import_manifest(manifest, author=author, kind="models", models_only=True, note=note)

    def _model_id(self, connection: Connection, name: str, classes: list[str] | None,
                  digest: str | None = None) -> int:
        row = connection.execute(text("SELECT id, classes_json FROM models WHERE name = :n"), {"n": name}).first()
        if row is None:
            connection.execute(text("INSERT INTO models (name, classes_json, created_at, outputs_digest) "
                                    "VALUES (:n, :c, :t, :d)"),
                               {"n": name, "c": json.dumps(classes) if classes else None, "t": now(), "d": digest})
            return int(connection.execute(text("SELECT id FROM models WHERE name = :n"), {"n": name}).scalar_one())
        if classes and row[1] and json.loads(row[1]) != classes:
            raise ProjectError(f"model '{name}' was imported before with classes {json.loads(row[1])}, "
                               f"now with {classes}; use the same probability columns or another model name")
        return int(row[0])

    def add_predictions(self, model: str, sample_ids, probabilities: np.ndarray, classes: list[str], *,
                        author: str | None = None, note: dict | None = None) -> None:
        """Record a new model's outputs on samples already in the project (e.g. a repaired model): prediction is the
        most probable class, confidence its probability, score whether it equals the label."""
        import pandas as pd

        if model in self.models():
            raise ProjectError(f"a model named '{model}' is already in this project; choose another name")
        sample_ids = np.asarray(sample_ids, dtype=np.int64)
        probabilities = np.asarray(probabilities, dtype=np.float32)
        predictions = np.asarray(classes, dtype=object)[probabilities.argmax(axis=1)]
        chosen = self.samples(sample_ids=sample_ids)
        labels = chosen["label"].to_numpy()
        score = np.array([np.nan if pd.isna(label) else float(p == label) for p, label in zip(predictions, labels)])
        with self.arrays.publishing() as staged:
            staged.stage(f"probabilities/{_safe(model)}/added", sample_ids=sample_ids, probabilities=probabilities,
                         classes=np.array(classes, dtype=str))
            with write_transaction(self.engine) as connection:
                model_id = self._model_id(connection, model, list(classes))
                _insert_predictions(connection, model_id, sample_ids, predictions, probabilities.max(axis=1),
                                    score, chosen["split"].to_numpy(object), labels)
                record_audit(connection, author_name(author), "add model", f"model:{model}", None,
                             {"samples": len(sample_ids), **(note or {})})

    def set_meta(self, key: str, value: str, *, author: str | None = None) -> None:
        with write_transaction(self.engine) as connection:
            before = connection.execute(text("SELECT value FROM project_meta WHERE key = :k"), {"k": key}).scalar()
            if before is None:
                connection.execute(text("INSERT INTO project_meta (key, value) VALUES (:k, :v)"),
                                   {"k": key, "v": value})
            else:
                connection.execute(text("UPDATE project_meta SET value = :v WHERE key = :k"), {"k": key, "v": value})
            record_audit(connection, author_name(author), "set meta", f"meta:{key}", before, value)

    # ----- reading ----------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.meta().get("name", self.folder.name)

    def meta(self) -> dict[str, str]:
        with read_connection(self.engine) as connection:
            return dict(connection.execute(text("SELECT key, value FROM project_meta")).all())

    def schema_version(self) -> int:
        with read_connection(self.engine) as connection:
            return int(connection.execute(text("SELECT MAX(version) FROM schema_migrations")).scalar_one())

    def data_version(self) -> int:
        """Grows with every logged change of the project's data (not with the board's, views' and jobs' own records,
        audit.NOT_DATA); caches of project data are keyed by it."""
        with read_connection(self.engine) as connection:
            # read backwards from the newest entry: no scan of a long log
            newest = connection.execute(text("SELECT id FROM audit_log WHERE action NOT IN :skipped ORDER BY id DESC "
                                             "LIMIT 1").bindparams(bindparam("skipped", expanding=True)),
                                        {"skipped": list(NOT_DATA)}).scalar()
        return int(newest or 0)

    def models(self) -> list[str]:
        with read_connection(self.engine) as connection:
            return [row[0] for row in connection.execute(text("SELECT name FROM models ORDER BY id"))]

    def model_classes(self, model: str) -> list[str] | None:
        with read_connection(self.engine) as connection:
            raw = connection.execute(text("SELECT classes_json FROM models WHERE name = :n"), {"n": model}).scalar()
        return json.loads(raw) if raw else None

    def _roots(self, connection: Connection) -> dict[int, Path]:
        return {int(i): (self.folder / p).resolve() if not Path(p).is_absolute() else Path(p)
                for i, p in connection.execute(text("SELECT id, path FROM data_roots"))}

    @staticmethod
    def _read_sample_rows(connection: Connection, roots: dict[int, str]) -> pd.DataFrame:
        import pandas as pd

        columns = read_columns(connection, "SELECT id, sample_key, root_id, path, content_hash, width, height, label, "
                                           "split FROM samples ORDER BY id")
        ids = pd.Index(columns["id"].astype(np.int64), name="id")
        return pd.DataFrame({"sample_key": columns["sample_key"], "content_hash": columns["content_hash"],
                             "width": columns["width"].astype(np.int64), "height": columns["height"].astype(np.int64),
                             "label": columns["label"], "split": columns["split"],
                             "image_path": _joined_paths(roots, columns["root_id"], columns["path"], ids)}, index=ids)

    def samples(self, model: str | None = None, *, sample_ids=None) -> pd.DataFrame:
        """One row per sample (index: sample id; all, or `sample_ids` in that order) with its image path, label,
        split and, for a model, its prediction, confidence, score and correctness."""
        import pandas as pd

        with read_connection(self.engine) as connection:
            roots = {i: str(p) for i, p in self._roots(connection).items()}  # where they are now (the folder can move)
            cached = self._per_import(connection, "samples", functools.partial(self._read_sample_rows, roots=roots),
                                      also=f"roots {json.dumps(sorted(roots.items()))}")
            frame = cached.copy(deep=False) if sample_ids is None else cached.loc[np.asarray(sample_ids)]
            if model is not None:
                predictions = self._per_model(connection, model, "predictions", self._read_prediction_rows)
        if model is not None:
            frame = frame.join(predictions, how="left")
            correct = (frame["prediction"] == frame["label"]).astype("boolean")
            correct[frame["label"].isna() | frame["prediction"].isna()] = pd.NA
            frame["correct"] = correct
        return frame

    def predictions(self, model: str) -> pd.DataFrame:
        """A model's outputs alone (index: sample id; prediction, confidence, score), as samples(model) joins them to
        every sample (that join took 1.2 s at ten million, for a command that reads one column of it)."""
        with read_connection(self.engine) as connection:
            return self._per_model(connection, model, "predictions", self._read_prediction_rows).copy(deep=False)

    @property
    def task(self) -> str | None:
        """The name of the task the project's first import stated (hibug_core.tasks; None before any import)."""
        return self.meta().get("task")

    def objects(self, model: str | None = None, *, columns: list[str] | None = None) -> pd.DataFrame:
        """Object samples (index: sample id) with their image, kind (ground-truth object, or a model's false positive)
        and box; for a model also its outcome, TIDE error type, IoU and predicted box (None where it has none), or
        only the outcome `columns` named (each column joined to ten million objects takes a fifth of a second).
        Only imports change them (a model's outcomes come with it): kept as column files, as samples() is."""
        with read_connection(self.engine) as connection:
            frame = self._per_import(connection, "objects", object_store.read_object_rows)
            if model is None:
                return frame.copy(deep=False)
            outcomes = self._per_model(connection, model, "outcomes", object_store.read_outcome_rows)
        return frame.join(outcomes if columns is None else outcomes[columns], how="left")

    def object_evaluation(self, model: str, split: str | None = None) -> dict | None:
        """A model's COCO evaluation of one import's ground truth (store.object_store.object_evaluation)."""
        return object_store.object_evaluation(self.engine, model, split)

    def evaluations_per_import(self, model: str, split: str):
        """A model's COCO evaluation of each import holding `split` (store.object_store.evaluations_per_import)."""
        return object_store.evaluations_per_import(self.engine, model, split)

    def match_settings(self) -> dict:
        """How the newest object import matched its results (objects.matching.Matches.settings); empty for images."""
        return object_store.match_settings(self.engine)

    def keypoint_skeleton(self) -> dict:
        """The skeleton people were imported with: keypoint `names` and `limbs`; empty for boxes."""
        return object_store.keypoint_skeleton(self.engine)

    def split_ids(self, splits: list[str] | None) -> pd.Index | None:
        """Ids of the samples in `splits` (None: no choice, every sample)."""
        if not splits:
            return None
        samples = self.samples()
        return samples.index[samples["split"].isin(splits)]

    def known_tags(self) -> pd.DataFrame:
        """Imported or ground-truth tags: one column per attribute, indexed by sample id (copy-on-write; read from the
        database again only after an import, the only way they change)."""
        with read_connection(self.engine) as connection:
            return self._per_import(connection, "known-tags", self._read_known_tag_rows).copy(deep=False)

    def has_known_tags(self) -> bool:
        """Whether any imported tag is stored (one row looked at, where known_tags() reads them all)."""
        with read_connection(self.engine) as connection:
            return known_tag_columns.any_stored(connection)

    def _per_import(self, connection: Connection, name: str, read_rows, *, also: str = "") -> pd.DataFrame:
        """A table that only imports (and what `also` names) change: samples, known tags, a model's predictions.
        Once per process and version it is taken from its column file `name`; read_rows(connection) reads it from
        SQL when the file does not hold this version, for the first reader after an import, which writes it."""
        newest = connection.execute(text("SELECT id, created_at FROM imports ORDER BY id DESC LIMIT 1")).first()
        version = " ".join(filter(None, ["none" if newest is None else f"{newest[0]} {newest[1]}", also]))
        return IMPORT_TABLES.get_or_make((self._identity, name, version), lambda: self.columns.get_or_read(
            name, version, lambda: read_rows(connection)))

    def _per_model(self, connection: Connection, model: str, name: str, read_rows) -> pd.DataFrame:
        """_per_import of a table of one model's rows (its predictions, its outcomes), which change only with an
        import or when the model is added (never after): read_rows(connection, model_id=...)."""
        row = connection.execute(text("SELECT id, created_at FROM models WHERE name = :n"), {"n": model}).first()
        if row is None:
            raise ProjectError(f"no model named '{model}' in this project; known: {', '.join(self.models())}")
        return self._per_import(connection, f"{name}-{row[0]}", functools.partial(read_rows, model_id=int(row[0])),
                                also=f"model {row[0]} {row[1]}")

    @staticmethod
    def _read_prediction_rows(connection: Connection, model_id: int) -> pd.DataFrame:
        import pandas as pd

        columns = read_columns(connection, "SELECT sample_id, prediction, confidence, score FROM predictions "
                                           "WHERE model_id = ?", (model_id,))
        return pd.DataFrame({"prediction": columns["prediction"], "confidence": columns["confidence"].astype(float),
                             "score": columns["score"].astype(float)},
                            index=pd.Index(columns["sample_id"].astype(np.int64), name="id"))

    @staticmethod
    def _read_known_tag_rows(connection: Connection) -> pd.DataFrame:
        return known_tag_columns.read(connection)

    def probabilities(self, model: str) -> tuple[np.ndarray, np.ndarray, list[str]] | None:
        """(sample_ids, probabilities, classes) for a model, or None when its manifest had none."""
        names = self.arrays.names(f"probabilities/{_safe(model)}/")
        if not names:
            return None
        parts = [self.arrays.load(name) for name in names]
        classes = [str(c) for c in parts[0]["classes"]]
        return (np.concatenate([p["sample_ids"] for p in parts]),
                np.concatenate([p["probabilities"] for p in parts]), classes)

    def split_counts(self) -> dict[str, int]:
        """Samples per split, as the import and the removal of samples keep them (counting them took 0.7 s at ten
        million objects); a split with none left is not named."""
        with read_connection(self.engine) as connection:
            return read_split_counts(connection)

    def model_scores(self) -> pd.DataFrame:
        """Mean score and sample count per model and split (labelled samples only)."""
        import pandas as pd

        return pd.DataFrame(self._model_score_rows(), columns=["model", "split", "n", "mean_score"])

    def _model_score_rows(self) -> list[dict]:
        with read_connection(self.engine) as connection:
            result = connection.execute(text(
                "SELECT m.name AS model, x.split, x.n, x.score_sum / NULLIF(x.n, 0) AS mean_score "
                "FROM model_split_scores x JOIN models m ON m.id = x.model_id ORDER BY m.name, x.split"))
            return [dict(row) for row in result.mappings()]

    def imports(self) -> pd.DataFrame:
        import pandas as pd

        with read_connection(self.engine) as connection:
            return pd.read_sql_query(text("SELECT * FROM imports ORDER BY id"), connection)

    def _import_count(self) -> int:
        with read_connection(self.engine) as connection:
            return int(connection.execute(text("SELECT COUNT(*) FROM imports")).scalar_one())

    def audit_log(self) -> pd.DataFrame:
        import pandas as pd

        with read_connection(self.engine) as connection:
            return pd.read_sql_query(text("SELECT * FROM audit_log ORDER BY id"), connection)

    def served_image(self, image_path) -> Path:
        """`image_path` (from samples()) as the file to show or send, after following links: ProjectError when it
        leads out of the project's data roots (a link made inside a data root after import)."""
        if not image_path:  # _joined_paths: a stored path that leaves its data root
            raise ProjectError("this sample's stored image path leads out of its data root (its database was changed "
                               "by hand or crafted); not shown. `hibug remove` takes the sample out")
        real = Path(os.path.realpath(image_path))
        roots = self._real_roots()
        if not image_path or not any(real.is_relative_to(root) for root in roots):
            raise ProjectError(f"{image_path} leads outside the project's image folders (to {real}); not shown")
        if self.served_within is not None and not any(real.is_relative_to(os.path.realpath(root))
                                                      for root in self.served_within):
            logger.warning("refused to show %r: outside this server's data roots", str(real)[:200])
            raise ProjectError("this image lies outside this server's data roots; not shown (start the server with "
                               "--data-root naming its folder)")
        return real

    def _real_roots(self) -> list[Path]:
        """The data roots after following links, resolved again after each change of the data (only imports add
        roots): a project of a thousand roots took 17 ms to resolve them for every image shown. A root re-pointed
        on disk since can only make an image be refused, never let one out."""
        def resolve() -> list[Path]:
            with read_connection(self.engine) as connection:
                return [Path(os.path.realpath(root)) for root in self._roots(connection).values()]

        return REAL_ROOTS.get_or_make((self._identity, self.data_version()), resolve)

    def require_writable(self, what: str) -> None:
        """ProjectError before `what` starts when this project is open read-only (a read-only folder or mount, or
        only reading asked for): a writing command is refused up front, not after its work."""
        if self.read_only:
            raise ProjectError(f"{self.folder} is open read-only (its folder cannot be written, or only reading was "
                               f"asked for), so {what} cannot store anything; nothing was done. Copy the project "
                               "somewhere writable, or make its folder writable")

    @property
    def pictures_folder(self) -> Path:
        """The folder whose thumbs/ holds this project's thumbnails and crops: the project itself, or, opened
        read-only, a cache of this account's outside it (nothing is written into a read-only project)."""
        from hibug_core.thumbnails import read_only_pictures

        return read_only_pictures(self.folder) if self.read_only else self.folder

    def image_path(self, sample_id: int) -> Path:
        """The image file of a sample; always inside one of the project's data roots."""
        with read_connection(self.engine) as connection:
            row = connection.execute(text("SELECT root_id, path FROM samples WHERE id = :i"), {"i": sample_id}).first()
            if row is None:
                raise ProjectError(f"no sample with id {sample_id}")
            root = self._roots(connection)[int(row[0])]
        path = (root / row[1]).resolve()
        if not path.is_relative_to(root):
            raise ProjectError(f"sample {sample_id}'s path leaves its data root; refusing to read it")
        return path

    def describe(self) -> dict:
        """Everything `hibug info` prints, from aggregate queries only (fast on large projects)."""
        task = self.task
        return {
            "name": self.name,
            "folder": str(self.folder),
            "schema_version": self.schema_version(),
            "latest_schema_version": LATEST_VERSION,
            "splits": self.split_counts(),
            "models": self.models(),
            "scores": self._model_score_rows(),
            "imports": self._import_count(),
            "task": task,
            **({"coco": coco} if (coco := object_store.coco_summaries(self.engine)) else {}),
        }



def _joined_paths(root_text: dict[int, str], root_ids: np.ndarray, paths: np.ndarray, ids: pd.Index) -> np.ndarray:
    """Each sample's image path (its data root joined with its stored path); "" for a stored path that leaves its
    data root (e.g. "../" written into a shared database), which is never served. Only the paths that could leave
    (absolute, or with a "." or ".." part, or doubled slashes) are normalised one by one."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc

    root_of = pd.Series(root_text)
    joined = (root_of.reindex(root_ids.astype(np.int64)).to_numpy(object) + "/" + paths.astype(object)).astype(object)
    odd = pc.match_substring_regex(pa.array(paths, type=pa.string()), r"(?:^|/)\.{1,2}(?:/|$)|^/|//").to_numpy(
        zero_copy_only=False)
    for row in np.flatnonzero(odd):
        normal = os.path.normpath(joined[row])
        root = root_text[int(root_ids[row])].rstrip("/") + "/"
        joined[row] = normal if normal.startswith(root) else ""
    if (joined == "").any():
        first = int(np.argmax(joined == ""))
        logger.warning("%d sample path(s) leave their data root and are not served, e.g. sample %s (%r)",
                       int((joined == "").sum()), ids[first], str(paths[first])[:200])
    return joined


def _inserted_ids(connection: Connection, import_id: int, keys: np.ndarray) -> np.ndarray:
    """The ids the rows of an import got, in the order of `keys`. Rows inserted by one executemany while the write
    lock is held get consecutive ids in order; when the ids are exactly such a run that is all there is to read,
    otherwise they are read back by key."""
    import pandas as pd

    if not len(keys):  # models only, every row stored already
        return np.empty(0, dtype=np.int64)
    first, last, count = connection.execute(text("SELECT MIN(id), MAX(id), COUNT(*) FROM samples WHERE import_id = :i"),
                                            {"i": import_id}).one()
    if count == len(keys) and last - first + 1 == count:
        ends = dict(connection.execute(text("SELECT id, sample_key FROM samples WHERE id IN (:a, :b)"),
                                       {"a": first, "b": last}).all())
        if (ends[first], ends[last]) == (keys[0], keys[-1]):
            return np.arange(first, last + 1, dtype=np.int64)
    inserted = pd.read_sql_query(text("SELECT sample_key, id FROM samples WHERE import_id = :i"), connection,
                                 params={"i": import_id}, index_col="sample_key")["id"]
    return inserted.reindex(keys).to_numpy(np.int64)


def _stored_import_ids(connection: Connection, keys: np.ndarray) -> pd.Series:
    """The import of each of `keys` the project holds already (index: sample key; the keys it lacks are absent),
    found through the key's unique index with the keys sorted, so that its probes meet neighbouring pages: an import
    reads what it adds to, not every stored key (ten million keys read whole took 8-23 s and 2.5 GB, growing with the
    project at each import of a part)."""
    import pandas as pd

    connection.exec_driver_sql("CREATE TEMPORARY TABLE import_keys (sample_key TEXT NOT NULL)")
    try:
        ordered = np.sort(np.asarray(keys, dtype=object))
        insert_columns(connection, "import_keys", {"sample_key": ordered}, len(ordered))
        found = pd.read_sql_query(text("SELECT s.sample_key, s.import_id FROM import_keys k JOIN samples s "
                                       "ON s.sample_key = k.sample_key"), connection, index_col="sample_key")
        return found["import_id"]
    finally:
        connection.exec_driver_sql("DROP TABLE import_keys")


def _outputs_only_issues(manifest, stored, positions: np.ndarray, predicted: dict[str, set[int]]) -> Issues:
    """What stops a manifest's models from being added to the stored samples (`stored`: by sample key, with id, label,
    split, object_kind, owner and image_key; `positions`: each row's place in it, -1 when new; `predicted`: the
    samples each of the manifest's models already has outputs on): a model's outputs given again, no model, a row
    that is not stored (only an object model's own false positives may be new), a label or split that differs, and
    true objects of the same images that the manifest lacks (its AP would be over other objects)."""
    import pandas as pd

    rows = manifest.samples
    found = Issues(IngestConfig().max_issues)  # every problem counted, the first ones kept
    ids = stored["id"].to_numpy(np.int64)[positions[positions >= 0]]
    for name, outputs in manifest.models.items():  # a model may gain outputs on samples it has none for, no more
        given = np.array([p is not None for p in outputs.prediction], dtype=bool)[positions >= 0]
        again = int(np.isin(ids[given], list(predicted.get(name, ())), assume_unique=False).sum())
        if again:
            found.add(None, f"pred:{name}", f"a model named '{name}' is already in this project, with outputs on "
                      f"{again:,} of these samples; name the new one differently (e.g. by its version)")
    if not manifest.models:
        found.add(None, None, "no model output to add: give a 'prediction' or 'pred:<model>' column")
    owners = None if manifest.objects is None else manifest.objects["owner"].to_numpy(object)
    own = np.zeros(len(rows), dtype=bool) if owners is None else np.isin(owners, list(manifest.models))  # a new
    # model's false positives (a true object has no owner)
    found.add_rows(np.flatnonzero((positions < 0) & ~own), manifest.key_column, lambda i: (
        f"'{rows['sample_key'].iat[i]}' is not in the project; add new images with `hibug import` without "
        "--models-only" + ("" if owners is None else " (for objects: the same ground-truth file as the project's)")))
    known = np.flatnonzero(positions >= 0)
    for column in ("label", "split"):
        theirs = stored[column].to_numpy(object)[positions[known]]
        ours = rows[column].to_numpy(object)[known]
        differs = np.array([not (pd.isna(a) and pd.isna(b)) and a != b for a, b in zip(theirs, ours)], dtype=bool)
        found.add_rows(known[np.flatnonzero(differs)], column, lambda i, theirs=theirs, ours=ours: (
            f"'{ours[np.searchsorted(known, i)]}' differs from the project's '{theirs[np.searchsorted(known, i)]}' "
            "for this sample; the models are compared on the stored labels and splits"))
    if owners is not None:  # the file's true objects are the project's, where it has them
        for row, what in _truth_differences(manifest, stored, positions):
            found.add(row, "annotations", f"'{rows['sample_key'].iat[row]}': {what}; give the ground-truth file the "
                      "project was made from (models are compared on the same objects)")
    if owners is not None:  # every stored true object of the file's images must be in the file
        images = set(manifest.objects["image_key"])
        ours = set(rows["sample_key"].to_numpy(object)[pd.isna(owners)])
        theirs = stored.index[stored["owner"].isna().to_numpy() & stored["object_kind"].notna().to_numpy()
                              & stored["image_key"].isin(images).to_numpy()]
        missing = sorted(set(theirs) - ours)
        for key in missing[:found.cap]:
            found.add(None, "annotations", f"'{key}' is in the project but not in this ground truth: give the "
                      "ground-truth file the project was made from (the AP of the models compared is over the same "
                      "objects)")
        found.total += max(len(missing) - found.cap, 0)
    return found


TRUTH_COLUMNS = "box_x, box_y, box_w, box_h, keypoints_json, mask_json"  # what a true object is, besides its class


def _outputs_digest(images: np.ndarray, outputs) -> str:
    """A digest of one model's outputs in an import (on each image: prediction, confidence, score, in any order):
    equal for the same outputs under another name."""
    import hashlib

    import pandas as pd

    given = np.array([p is not None for p in outputs.prediction], dtype=bool)
    rows = pd.DataFrame({"image": np.asarray(images, dtype=object)[given],
                         "prediction": np.asarray(outputs.prediction, dtype=object)[given],
                         "confidence": np.round(np.asarray(outputs.confidence, float)[given], 9),
                         "score": np.round(np.asarray(outputs.score, float)[given], 9)})
    hashed = np.sort(pd.util.hash_pandas_object(rows, index=False).to_numpy())  # one number a row, in any order
    return hashlib.blake2b(hashed.tobytes(), digest_size=16).hexdigest()


def _truth_differences(manifest, stored, positions: np.ndarray) -> list[tuple[int, str]]:
    """(row, what differs) for each true object of the manifest whose box, keypoints or mask is not the stored one:
    models are compared only on the same truth."""
    import pandas as pd

    rows = np.flatnonzero((positions >= 0) & manifest.objects["owner"].isna().to_numpy())
    if not len(rows):
        return []
    theirs = stored.iloc[positions[rows]]
    ours = manifest.objects.iloc[rows]
    box = np.c_[[ours[c].to_numpy(float) for c in ("box_x", "box_y", "box_w", "box_h")]].T
    kept = np.c_[[theirs[c].to_numpy(float) for c in ("box_x", "box_y", "box_w", "box_h")]].T
    moved = ~np.isclose(box, kept, rtol=0, atol=1e-6).all(axis=1)
    out = [(int(r), f"its box {np.round(box[k], 2).tolist()} is {np.round(kept[k], 2).tolist()} in the project")
           for k, r in enumerate(rows) if moved[k]]
    for column, what in (("keypoints_json", "its keypoints"), ("mask_json", "its mask")):
        if column not in ours:
            continue
        mine, kept_text = ours[column].to_numpy(object), theirs[column].to_numpy(object)
        for k, r in enumerate(rows):
            a, b = mine[k], kept_text[k]
            if not moved[k] and (pd.isna(a) != pd.isna(b) or (not pd.isna(a) and json.loads(a) != json.loads(b))):
                out.append((int(r), f"{what} differ{'s' if what.endswith('mask') else ''} from the project's"))
    return sorted(out)


def _crowd_issues(connection: Connection, manifest, found: Issues) -> None:
    """The images of a models-only import whose crowd regions are not those the project's ground truth gave (where
    the project kept them: images imported since it does)."""
    if not manifest.crowd_regions:
        return
    keys = list(manifest.crowd_regions)
    kept = {}
    for listed, params in in_chunks(keys):
        kept.update(connection.execute(text(f"SELECT image_key, crowd_json FROM truth_images WHERE image_key IN "
                                            f"{listed}"), params).all())
    for key in sorted(k for k in keys if k in kept and kept[k] != manifest.crowd_regions[k])[:found.cap]:
        found.add(None, "annotations", f"the crowd regions of image '{key}' are not the project's: give the "
                  "ground-truth file the project was made from (a detection on a crowd region is ignored, so the "
                  "models would be matched against other truths)")


def _set_task(connection: Connection, task: str) -> None:
    _keep_first(connection, "task", task, lambda before: f"this project holds {before} samples; samples of the {task} "
                "task go in a project of their own")


def _set_measures(connection: Connection, measured_with: str | None) -> None:
    """A project's measured tags mean one set of bins: kept at its first import, every later import binned alike."""
    if measured_with is not None:
        _keep_first(connection, MEASURES_META, measured_with, lambda _: (
            "these samples' measured tags (object size, position, ...) were binned with other settings than this "
            "project's; import them with the project's own (hibug import reads them from the project)"))


def _keep_first(connection: Connection, key: str, value: str, refusal) -> None:
    """A project_meta value set by the first import; a later import must bring the same (refusal(kept): why not)."""
    before = connection.execute(text("SELECT value FROM project_meta WHERE key = :k"), {"k": key}).scalar()
    if before is None:
        connection.execute(text("INSERT INTO project_meta (key, value) VALUES (:k, :v)"), {"k": key, "v": value})
    elif before != value:
        raise ProjectError(refusal(before))


def _insert_predictions(connection: Connection, model_id: int, sample_ids, predictions, confidence, score,
                        splits, labels) -> None:
    """One model's outputs on samples it had none for (of the given splits and labels); a NaN confidence or score is
    stored as unknown."""
    import pandas as pd

    sample_ids = np.asarray(sample_ids, dtype=np.int64)
    score = np.asarray(score, dtype=float)
    insert_columns(connection, "predictions", {
        "model_id": int(model_id), "sample_id": sample_ids, "prediction": np.asarray(predictions, dtype=object),
        "confidence": np.asarray(confidence, dtype=float), "score": score}, len(sample_ids))
    # The per-split aggregate `hibug info` reads, brought up to date in the same transaction: these rows' counts and
    # sums added to it (summing them again from the table by a join took over a second at a million rows). Only the
    # samples a score judges count: not a false positive (metrics.judged).
    codes, names = pd.factorize(np.asarray(splits, dtype=object))
    scored = judged(labels, score)
    counts = np.bincount(codes[scored], minlength=len(names))
    sums = np.bincount(codes[scored], weights=score[scored], minlength=len(names))
    connection.execute(
        text("INSERT INTO model_split_scores (model_id, split, n, score_sum) VALUES (:m, :s, :n, :t) "
             "ON CONFLICT (model_id, split) DO UPDATE SET n = model_split_scores.n + excluded.n, "
             "score_sum = COALESCE(model_split_scores.score_sum + excluded.score_sum, model_split_scores.score_sum, "
             "excluded.score_sum)"),
        [{"m": int(model_id), "s": str(name), "n": int(n), "t": float(total) if n else None}
         for name, n, total in zip(names, counts, sums)])


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
