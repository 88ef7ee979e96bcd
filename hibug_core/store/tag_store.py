"""Tags in the store: tagging runs as arrays (fast at 100k images), people's corrections as rows that win."""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from sqlalchemy import text

from hibug_core.errors import ProjectError, TaggingError
from hibug_core.redaction import redact
from hibug_core.store import known_tag_columns
from hibug_core.store.arrays import DamagedArraysError
from hibug_core.store.audit import author_name, now, record
from hibug_core.store.db import read_connection, write_transaction
from hibug_core.values import ValueRefused, normalise_name

logger = logging.getLogger(__name__)

CORRECTION_KINDS = ("correct", "confirm", "example", "withdraw")


@dataclass
class TagResult:
    """What one tagging run produced: per sample and attribute, the tag index, its score and the margin."""

    sample_ids: np.ndarray  # (n,) int64
    attributes: dict[str, tuple[str, ...]]  # attribute -> its tags when the run was made (column order)
    tag_index: np.ndarray  # (n, A) int16, -1 where the run gave no tag
    score: np.ndarray  # (n, A) float32, probability of the chosen tag (nan if none)
    margin: np.ndarray  # (n, A) float32, top-1 minus top-2 probability (nan if none)

    def __post_init__(self):
        n, a = len(self.sample_ids), len(self.attributes)
        for name in ("tag_index", "score", "margin"):
            if getattr(self, name).shape != (n, a):
                raise ValueError(f"{name} has shape {getattr(self, name).shape}, expected {(n, a)}")


@dataclass
class TagTable:
    """The tags in force: one column per attribute (categorical), indexed by sample id."""

    tags: pd.DataFrame
    score: pd.DataFrame
    margin: pd.DataFrame
    source: dict[str, str] = field(default_factory=dict)  # attribute -> the source in force (IMPORTED, "run:<id>")
    corrected: pd.DataFrame | None = None  # True where a person set the tag

    def uncertain(self, margin: float = 0.1) -> pd.DataFrame:
        """True where the model's top tag beat the runner-up by less than `margin` (and no person set the tag)."""
        flagged = self.margin < margin
        return flagged & ~self.corrected if self.corrected is not None else flagged

    def codes(self, attribute: str) -> tuple[np.ndarray, list[str]]:
        """Integer codes (-1: no tag) and the tag names of one attribute."""
        column = self.tags[attribute]
        return column.cat.codes.to_numpy(), list(column.cat.categories)


def _stored_attributes(attributes: dict) -> dict[str, list[str]]:
    """A new run's attribute and tag names in the stored form, whichever tagger made them (runs stored before are
    read as they are); two that become one are refused."""
    stored = {normalise_name(name, "the attribute"): [normalise_name(t, f"a tag of {name!r}", "tag") for t in tags]
              for name, tags in attributes.items()}
    if len(stored) != len(attributes) or any(len(set(t)) != len(t) for t in stored.values()):
        raise ValueRefused(f"two attributes, or two tags of one attribute, are one name once written in one form: "
                           f"{dict(attributes)}")
    return stored


def begin_run(project, *, method: str, encoder: str | None, schema_version: int | None,
              attributes: dict[str, tuple[str, ...]], author: str | None = None) -> int:
    with write_transaction(project.engine) as connection:
        connection.execute(
            text("INSERT INTO tag_runs (method, encoder, schema_version, attributes_json, status, n_samples, "
                 "author, created_at) VALUES (:m, :e, :v, :a, 'running', 0, :u, :t)"),
            {"m": method, "e": encoder, "v": schema_version, "a": json.dumps(_stored_attributes(attributes)),
             "u": author_name(author), "t": now()})
        return int(connection.execute(text("SELECT MAX(id) FROM tag_runs")).scalar_one())


def finish_run(project, run_id: int, result: TagResult, *, author: str | None = None) -> None:
    """Publish a run's arrays and mark it finished; its tags are in force where no better measured source is."""
    name = f"tags/run-{run_id}"
    with project.arrays.publishing() as staged:
        staged.stage(name, sample_ids=result.sample_ids.astype(np.int64), tag_index=result.tag_index.astype(np.int16),
                     score=result.score.astype(np.float32), margin=result.margin.astype(np.float32))
        with write_transaction(project.engine) as connection:
            connection.execute(
                text("UPDATE tag_runs SET status = 'finished', array_name = :n, n_samples = :c, attributes_json = :a, "
                     "finished_at = :t WHERE id = :i"),
                {"n": name, "c": len(result.sample_ids), "t": now(), "i": run_id,
                 "a": json.dumps(_stored_attributes(result.attributes))})
            method = connection.execute(text("SELECT method FROM tag_runs WHERE id = :i"), {"i": run_id}).scalar_one()
            record(connection, author_name(author), "tag", f"tag_run:{run_id}", None,
                   {"method": method, "attributes": list(result.attributes), "samples": len(result.sample_ids)})


def fail_run(project, run_id: int, message: str) -> None:
    with write_transaction(project.engine) as connection:
        connection.execute(text("UPDATE tag_runs SET status = 'failed', message = :m, finished_at = :t WHERE id = :i"),
                           {"m": redact(message), "t": now(), "i": run_id})


def save_run(project, result: TagResult, *, method: str, encoder: str | None = None,
             schema_version: int | None = None, author: str | None = None) -> int:
    run_id = begin_run(project, method=method, encoder=encoder, schema_version=schema_version,
                       attributes=result.attributes, author=author)
    finish_run(project, run_id, result, author=author)
    return run_id


def tags_version(project) -> str:
    """Changes whenever the data or the tags in force may have: an import or removal, a run finished, a person
    corrected a tag or chose a source, the schema changed (not when a job only made arrays, such as a map: what
    slice reports and comparisons are computed from, and kept for)."""
    with read_connection(project.engine) as connection:
        return _tags_version(project, connection)


def _tags_version(project, connection) -> str:
    run = connection.execute(text("SELECT MAX(id) FROM tag_runs WHERE status = 'finished'")).scalar()
    correction = connection.execute(text("SELECT MAX(id) FROM tag_corrections")).scalar()
    schema = connection.execute(text("SELECT MAX(version) FROM attribute_schemas")).scalar()
    choice = connection.execute(text("SELECT MAX(id) FROM tag_source_choices")).scalar()
    return f"{project.data_version()}.{run or 0}.{correction or 0}.{schema or 0}.{choice or 0}"


def project_state(project) -> str:
    """The one version signal of the dashboard's caches: changes with any stored change (data, tags, schema, a
    finished job's arrays such as maps)."""
    with read_connection(project.engine) as connection:
        finished = connection.execute(text("SELECT MAX(id) FROM jobs WHERE finished_at IS NOT NULL")).scalar()
        return f"{_tags_version(project, connection)}.{finished or 0}"


def runs(project) -> pd.DataFrame:
    with read_connection(project.engine) as connection:
        return pd.read_sql_query(text("SELECT * FROM tag_runs ORDER BY id"), connection)


def run_attributes(project, run_id: int) -> dict[str, tuple[str, ...]]:
    with read_connection(project.engine) as connection:
        raw = connection.execute(text("SELECT attributes_json FROM tag_runs WHERE id = :i"), {"i": run_id}).scalar()
    if raw is None:
        raise ProjectError(f"no tagging run #{run_id}")
    return {k: tuple(v) for k, v in json.loads(raw).items()}


def load_run(project, run_id: int) -> TagResult:
    """A finished run's tags. When its file is damaged, the run is marked failed with the reason and the file set
    aside, and it reads as no tags (the tags in force fall back to earlier sources); on a read-only project, where
    that cannot be done, TaggingError says so."""
    try:
        arrays = project.arrays.load(f"tags/run-{run_id}")
    except DamagedArraysError as error:
        message = (f"the tags of run #{run_id} could not be read ({error}); the run is set aside and the tags in "
                   "force come from earlier sources: tag again to replace them")
        if project.read_only:
            raise TaggingError(message + " (this project is open read-only: open it writable once)") from None
        project.arrays.set_aside(f"tags/run-{run_id}")
        fail_run(project, run_id, message)
        logger.warning(message)
        attributes = run_attributes(project, run_id)
        nothing = np.zeros((0, len(attributes)), dtype=np.float32)
        return TagResult(np.zeros(0, dtype=np.int64), attributes, np.zeros((0, len(attributes)), dtype=np.int16),
                         nothing, nothing)
    return TagResult(arrays["sample_ids"], run_attributes(project, run_id), arrays["tag_index"], arrays["score"],
                     arrays["margin"])


class StaleTagError(TaggingError):
    """A person's tag changed since the editor saw it; nothing was written."""

    def __init__(self, attribute: str, sample_id: int, seen, current, who: str, at: str):
        self.current = current
        super().__init__(f"{who} set '{attribute}' of sample {sample_id} to '{current or 'no correction'}' at {at} "
                         f"(you saw '{seen or 'no correction'}'). Nothing was overwritten; look at their tag and "
                         "correct again.")


def correct_tags(project, attribute: str, sample_ids, tag: str | None, *, kind: str = "correct",
                 author: str | None = None, seen: dict | None = None) -> int:
    """Set (or, with tag=None, withdraw) a person's tag of `attribute` on samples; it overrides model tags.
    seen: {sample id: the person's tag the editor saw (None: none)}; when given, a sample whose correction changed
    since is refused with StaleTagError and nothing is written."""
    if kind not in CORRECTION_KINDS:
        raise ValueError(f"kind must be one of {CORRECTION_KINDS}")
    attribute = normalise_name(attribute, "the attribute")
    tag = None if tag is None else normalise_name(tag, "the tag", "tag")
    sample_ids = [int(s) for s in np.atleast_1d(sample_ids)]
    author = author_name(author)
    with write_transaction(project.engine) as connection:
        before = latest_corrections(connection, attribute, sample_ids)
        for s in sample_ids if seen is not None else ():
            if before.get(s) != seen.get(s, seen.get(str(s))):
                who, at = connection.execute(
                    text("SELECT actor, at FROM tag_corrections WHERE attribute = :a AND sample_id = :s "
                         "ORDER BY id DESC LIMIT 1"), {"a": attribute, "s": s}).first() or ("nobody", "no time")
                raise StaleTagError(attribute, s, seen.get(s, seen.get(str(s))), before.get(s), who, at)
        stamp = now()
        connection.execute(
            text("INSERT INTO tag_corrections (attribute, sample_id, tag, kind, actor, at) "
                 "VALUES (:a, :s, :t, :k, :u, :at)"),
            [{"a": attribute, "s": s, "t": tag, "k": "withdraw" if tag is None else kind, "u": author, "at": stamp}
             for s in sample_ids])
        record(connection, author, f"{kind} tag", f"tags:{attribute}",
               {str(s): before.get(s) for s in sample_ids}, {"tag": tag, "samples": sample_ids})
    return len(sample_ids)


# The newest correction of every (attribute, sample): the one in force (its tag is NULL when withdrawn).
_NEWEST_CORRECTIONS = ("tag_corrections c JOIN (SELECT attribute, sample_id, MAX(id) AS id FROM tag_corrections "
                       "GROUP BY attribute, sample_id) m ON m.id = c.id")


def latest_corrections(connection, attribute: str, sample_ids: list[int]) -> dict:
    rows = connection.execute(text(f"SELECT c.sample_id, c.tag FROM {_NEWEST_CORRECTIONS} WHERE c.attribute = :a"),
                              {"a": attribute}).all()
    wanted = set(sample_ids)
    return {int(s): t for s, t in rows if int(s) in wanted}


def corrections(project, attribute: str | None = None) -> pd.DataFrame:
    """The correction in force per (attribute, sample): the newest one, withdrawn ones left out."""
    query = (f"SELECT c.attribute, c.sample_id, c.tag, c.kind, c.actor, c.at FROM {_NEWEST_CORRECTIONS} "
             "WHERE c.tag IS NOT NULL")
    params = {}
    if attribute is not None:
        query += " AND c.attribute = :a"
        params["a"] = attribute
    with read_connection(project.engine) as connection:
        return pd.read_sql_query(text(query + " ORDER BY c.attribute, c.sample_id"), connection, params=params)


IMPORTED = "imported"  # the source key of the imported attr: columns (known tags)
AUTO = "auto"  # a stored choice meaning: the best measured source


def run_key(run_id: int) -> str:
    return f"run:{int(run_id)}"


def run_id_of(source: str) -> int | None:
    """The run a source key names ("run:12" -> 12); None for any other key, a malformed one included."""
    number = source.split(":", 1)[1] if source.startswith("run:") else ""
    return int(number) if number.isascii() and number.isdigit() else None


def _check_choice(connection, attribute: str, source: str) -> None:
    """TaggingError unless `source` can be put in force for `attribute`: an attribute of the newest schema or of the
    imported tags, and a source that holds its tags (imported tags of it, or a finished run that tagged it)."""
    schema = connection.execute(
        text("SELECT schema_json FROM attribute_schemas ORDER BY version DESC LIMIT 1")).scalar()
    named = {a["name"] for a in json.loads(schema).get("attributes", [])} if schema else set()
    imported = known_tag_columns.attributes(connection)
    if attribute not in named | imported:
        known = ", ".join(sorted(named | imported)[:12]) or "none yet"
        raise TaggingError(f"'{attribute}' is not an attribute of this project (its attributes: {known}); nothing "
                           "was changed")
    if source == IMPORTED and attribute not in imported:
        raise TaggingError(f"'{attribute}' has no imported tags; choose auto or a tagging run (run:<id>); nothing "
                           "was changed")
    run_id = run_id_of(source)
    if run_id is not None:
        row = connection.execute(text("SELECT status, attributes_json FROM tag_runs WHERE id = :i"),
                                 {"i": run_id}).first()
        if row is None or row[0] != "finished" or attribute not in json.loads(row[1] or "{}"):
            why = ("there is no such run" if row is None else f"it is {row[0]}" if row[0] != "finished"
                   else f"it did not tag '{attribute}'")
            raise TaggingError(f"run #{run_id} cannot be put in force for '{attribute}': {why} (`hibug tags "
                               "PROJECT` lists the sources); nothing was changed")


def choose_source(project, attribute: str, source: str, *, author: str | None = None) -> None:
    """Put one tag source in force for `attribute` (AUTO: the best measured one again); logged, never silent."""
    if source != AUTO and source != IMPORTED and run_id_of(source) is None:
        raise TaggingError(f"unknown tag source '{source}'; use '{AUTO}', '{IMPORTED}' or 'run:<id>'")
    attribute = normalise_name(attribute, "the attribute")
    author = author_name(author)
    with write_transaction(project.engine) as connection:
        _check_choice(connection, attribute, source)
        before = _chosen(connection).get(attribute, AUTO)
        connection.execute(text("INSERT INTO tag_source_choices (attribute, source, actor, at) "
                                "VALUES (:a, :s, :u, :t)"),
                           {"a": attribute, "s": source, "u": author, "t": now()})
        record(connection, author, "choose tag source", f"tags:{attribute}", {"source": before}, {"source": source})


def _chosen(connection) -> dict[str, str]:
    rows = connection.execute(text("SELECT attribute, source FROM tag_source_choices ORDER BY id")).all()
    return {attribute: source for attribute, source in rows}


def chosen_sources(project) -> dict[str, str]:
    """The source a person put in force per attribute (attributes left to the best measured one are absent)."""
    with read_connection(project.engine) as connection:
        return {a: s for a, s in _chosen(connection).items() if s != AUTO}


def source_tags(project, source: str, attribute: str, index: pd.Index, cache: dict | None = None) -> pd.Series:
    """One source's tags of `attribute` on `index` (categorical, missing where it gave no tag: ten million rows as
    Python objects would cost a third of a second an attribute)."""
    if source == IMPORTED:
        known = project.known_tags()
        column = known[attribute] if attribute in known.columns else pd.Series(dtype="category")
        return column if column.index.equals(index) else column.reindex(index)
    run_id = run_id_of(source)
    cache = {} if cache is None else cache
    run = cache.get(run_id) or cache.setdefault(run_id, load_run(project, run_id))
    if attribute not in run.attributes:
        return pd.Series(None, index=index, dtype="category")
    column = list(run.attributes).index(attribute)
    names = list(run.attributes[attribute])
    codes = run.tag_index[:, column].astype(np.int64)
    codes[(codes < 0) | (codes >= len(names))] = -1  # no tag
    tags = pd.Series(pd.Categorical.from_codes(codes, categories=pd.Index(names, dtype=object)),
                     index=pd.Index(run.sample_ids))
    return tags.reindex(index)


def load_tags(project, attributes: dict[str, tuple[str, ...]], order: dict[str, list[str]], *,
              sample_ids: np.ndarray | None = None, with_corrections: bool = True) -> TagTable:
    """The tags in force for `attributes` (name -> current tags): per attribute, each sample takes its tag from the
    first source in `order[attribute]` that gave one (IMPORTED or run_key(id)), and people's corrections override
    them. Tags from older schema versions stay readable."""
    if sample_ids is None:
        sample_ids = project.samples().index.to_numpy()
    index = pd.Index(sample_ids, name="sample_id")
    loaded: dict[int, TagResult] = {}
    known = project.known_tags() if any(IMPORTED in o for o in order.values()) else pd.DataFrame()
    tags, scores, margins, source = {}, {}, {}, {}
    for attribute, current_tags in attributes.items():
        codes = np.full(len(index), -1, dtype=np.int64)
        score = np.full(len(index), np.nan, dtype=np.float32)
        margin = np.full(len(index), np.nan, dtype=np.float32)
        categories = list(current_tags)
        for key in order.get(attribute, []):
            open_rows = codes < 0
            if not open_rows.any():
                break
            if key == IMPORTED:
                if attribute not in known.columns:
                    continue
                local, distinct = pd.factorize(known[attribute].reindex(index).to_numpy(object))  # -1: no tag
                for tag in distinct:
                    if tag not in categories:
                        categories.append(tag)
                filled = open_rows & (local >= 0)
                codes[filled] = np.array([categories.index(t) for t in distinct], dtype=np.int64)[local[filled]]
                score[filled], margin[filled] = 1.0, 1.0
            else:
                run_id = run_id_of(key)
                run = loaded.get(run_id) or loaded.setdefault(run_id, load_run(project, run_id))
                if attribute not in run.attributes:
                    continue
                column = list(run.attributes).index(attribute)
                run_tags = run.attributes[attribute]
                # Map the run's tag list onto the current one, keeping tags the schema has since dropped.
                for tag in run_tags:
                    if tag not in categories:
                        categories.append(tag)
                mapping = np.array([categories.index(t) for t in run_tags] + [-1], dtype=np.int64)
                position = index.get_indexer(run.sample_ids)
                run_codes = mapping[run.tag_index[:, column]]
                found = (position >= 0) & (run_codes >= 0)
                found[found] = open_rows[position[found]]
                codes[position[found]] = run_codes[found]
                score[position[found]] = run.score[found, column]
                margin[position[found]] = run.margin[found, column]
            if (codes >= 0).any() and attribute not in source:
                source[attribute] = key
        tags[attribute], scores[attribute], margins[attribute] = (codes, categories), score, margin
    corrected = pd.DataFrame(False, index=index, columns=list(attributes))
    if with_corrections:
        fixes = corrections(project)
        for attribute, group in fixes[fixes["attribute"].isin(list(attributes))].groupby("attribute"):
            codes, categories = tags[attribute]
            position = index.get_indexer(group["sample_id"].to_numpy())
            found = position >= 0
            for tag in group["tag"]:
                if tag not in categories:
                    categories.append(tag)
            codes[position[found]] = [categories.index(t) for t in group["tag"].to_numpy()[found]]
            scores[attribute][position[found]] = 1.0
            margins[attribute][position[found]] = 1.0
            corrected.loc[index[position[found]], attribute] = True
    tag_frame = pd.DataFrame({a: pd.Categorical.from_codes(c, categories=cats) for a, (c, cats) in tags.items()},
                             index=index)
    return TagTable(tag_frame, pd.DataFrame(scores, index=index), pd.DataFrame(margins, index=index), source, corrected)
