"""Which project and model the dashboard shows, and cached access to their data."""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pandas as pd
import streamlit as st
from streamlit.errors import StreamlitSecretNotFoundError

from hibug_core.errors import HibugError, environment_failure
from hibug_core.markdown import plain
from hibug_core.redaction import remember_secret
from hibug_core.store.db import check_ahead
from hibug_core.store.project import Project
from hibug_core.store.tag_store import project_state
from hibug_core.tasks import Task, task_of
from hibug_ui.visitor import require_visitor, server_policy, sign_in_required, viewer_note, visitor

PROJECT_KEY = "hibug_project"
MODEL_KEY = "hibug_model"
USER_KEY = "hibug_user"
NEXT_PROJECT_KEY = "hibug_project_next"
IMPORT_NOTES_KEY = "hibug_import_notes"  # the changes a new project's import made to its values
USER_COOKIE = "hibug_user"
REMEMBER_KEY = "hibug_remember_user"
KEPT = "kept_"  # prefix of the plain session keys that keep the sidebar's values from page to page


def _keep(key: str) -> None:
    st.session_state[KEPT + key] = st.session_state[key]
    if key == USER_KEY:
        st.session_state[REMEMBER_KEY] = True


def sidebar_value(widget, label: str, key: str, default, **options):
    """A sidebar widget whose value survives moving to another page (Streamlit drops a widget's state when a page
    without that widget runs, so the value is kept under a plain key and given back to the widget each run)."""
    st.session_state.setdefault(KEPT + key, default)
    st.session_state[key] = st.session_state[KEPT + key]
    with st.sidebar:
        return widget(label, key=key, on_change=_keep, args=(key,), **options)


@st.cache_resource(show_spinner=False, max_entries=8)
def open_project(folder: str) -> Project:
    """One Project (and database engine) per folder per process, shared by every session (opened read-only on a
    read-only server, so not even a bug could write). Called with the folder alone, always: a second Project on the
    same database in this process would read its file header and, closing it, drop the locks SQLite holds for the
    first (POSIX locks are per process), so a job's worker could then delete the WAL the server writes to."""
    policy = server_policy()
    project = Project.open(folder, read_only=True if policy.read_only else None)
    reach = policy.reach()
    project.served_within = None if reach is None else tuple(Path(root) for root in reach.roots)
    check_ahead(project.engine)  # the check before a first change, made while people look (a minute at 10M objects)
    return project


# Every cached read below is keyed by project_state: the one signal that changes with any stored change.
# The two tables every page reads are kept once per process (cache_resource) and handed out as shallow copies:
# pandas' copy-on-write keeps a page's changes to its copy, and a million rows are not unpickled on every rerun.
def load_samples(project: Project, model: str | None) -> pd.DataFrame:
    """The sample table of a model."""
    return _samples(str(project.folder), model, project_state(project)).copy(deep=False)


@st.cache_resource(show_spinner=False, max_entries=6)  # each a whole sample table: kept few
def _samples(folder: str, model: str | None, state: str) -> pd.DataFrame:
    del state
    project = open_project(folder)
    return task_of(project).sample_table(project, model)


@st.cache_resource(show_spinner=False, max_entries=4)
def _evaluation_places(folder: str, model: str, split: str, state: str, _evaluated: pd.Index) -> np.ndarray:
    """Where a report's evaluated samples are among the model's sample table's rows (-1: not there)."""
    return _samples(folder, model, state).index.get_indexer(_evaluated)


def slice_places(project: Project, model: str, report, ref) -> np.ndarray | None:
    """Where a report's slice `ref`'s samples, failures first, are among load_samples(project, model)'s rows (None
    where some are not there), to take a page of them by position; kept until the project or the report changes (a
    slice's mask over ten million rows and the sort of its failures took a second or more of every page run)."""
    return _slice_places(str(project.folder), model, project_state(project), report.identity, ref, report)


@st.cache_resource(show_spinner=False, max_entries=4)
def _slice_places(folder: str, model: str, state: str, identity: str, ref, _report) -> np.ndarray | None:
    del identity
    places = _evaluation_places(folder, model, _report.split, state, _report.evaluation.index)[
        _report.sample_positions(ref)]
    places.setflags(write=False)
    return places if (places >= 0).all() else None


SLICE_COLUMNS = ("label", "prediction", "correct", "outcome", "error_type")  # what a slice's charts and filters read


@dataclasses.dataclass(frozen=True)
class SliceView:
    """What the Error slices page shows of a chosen slice besides its images, worked out once."""

    rows: pd.DataFrame  # the slice's rows' SLICE_COLUMNS, failures first
    error_types: pd.Series | None  # per error type of the task, how many of its failures (None: the task has none)
    choices: tuple[list[str], list[str]]  # its image grid's filter choices (slices.selection.filter_choices)


def slice_view(project: Project, model: str, report, ref) -> SliceView:
    """A report's slice `ref` as the Error slices page shows it, kept until the project or the report changes (taking
    its rows out of ten million, counting their error types and their tags took seconds of every page run)."""
    view = _slice_view(str(project.folder), model, project_state(project), report.identity, ref, report)
    return dataclasses.replace(view, rows=view.rows.copy(deep=False))


@st.cache_resource(show_spinner=False, max_entries=4)
def _slice_view(folder: str, model: str, state: str, identity: str, ref, _report) -> SliceView:
    from hibug_core.objects.summary import error_breakdown
    from hibug_core.slices.selection import filter_choices

    samples = _samples(folder, model, state)
    read = samples[[c for c in SLICE_COLUMNS if c in samples]]
    places = _slice_places(folder, model, state, identity, ref, _report)
    # by position where every sample is there: selecting millions of rows by id looked every id up again
    rows = read.take(places) if places is not None else read.loc[_report.sample_ids(ref)]
    task = task_of(open_project(folder))
    error_types = error_breakdown(rows, task.error_types).sum(axis=1) if task.error_groups else None
    at = places if places is not None and _report.all_tags.index.equals(samples.index) else None
    return SliceView(rows, error_types, filter_choices(rows, _report.all_tags, at))


def sample_counts_of(project: Project, model: str | None):
    """The Overview's sample counts (sample_counts.sample_counts), kept until the project changes (every row read:
    seconds of every run at ten million objects)."""
    return _sample_counts(str(project.folder), model, project_state(project))


@st.cache_data(show_spinner=False, max_entries=8)
def _sample_counts(folder: str, model: str | None, state: str):
    from hibug_core.sample_counts import sample_counts

    return sample_counts(_samples(folder, model, state))


def drawn_sample_of(project: Project, model: str, split: str, errors_only: bool, count: int):
    """The Overview's seeded draw of a split's rows (sample_counts.drawn_sample), kept until the project changes."""
    return _drawn_sample(str(project.folder), model, split, errors_only, count, project_state(project))


@st.cache_data(show_spinner=False, max_entries=16)
def _drawn_sample(folder: str, model: str, split: str, errors_only: bool, count: int, state: str):
    from hibug_core.sample_counts import drawn_sample

    return drawn_sample(_samples(folder, model, state), split, errors_only, count)


def score_summary(project: Project, model: str) -> tuple[pd.DataFrame, float]:
    """A model's score by split (metrics.score_by) and over the labelled samples outside training: every row read,
    so kept until the project changes (a second of every Overview run at ten million objects)."""
    return _score_summary(str(project.folder), model, project_state(project))


@st.cache_data(show_spinner=False, max_entries=8)
def _score_summary(folder: str, model: str, state: str) -> tuple[pd.DataFrame, float]:
    from hibug_core import metrics

    samples = _samples(folder, model, state)
    held_out = metrics.labelled(samples.loc[samples["split"] != "train", ["label", "score"]])
    return metrics.score_by(samples, "split"), float(held_out["score"].mean())


def object_figures(project: Project, model: str, split: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """An object model's confusion matrix and error types on `split` (objects.summary), kept until the project
    changes: the Overview's tables of every object, not computed again on each of its runs."""
    return _object_figures(str(project.folder), model, split, project_state(project))


@st.cache_data(show_spinner=False, max_entries=8)
def _object_figures(folder: str, model: str, split: str, state: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    from hibug_core.objects.summary import error_breakdown, evaluated_objects, object_confusion

    evaluated = evaluated_objects(_samples(folder, model, state), split)
    return object_confusion(evaluated), error_breakdown(evaluated, task_of(open_project(folder)).error_types)


def confusion_cell(project: Project, model: str, split: str, true: str, predicted: str) -> pd.Index:
    """The ids of the objects in one cell of the Overview's confusion matrix (objects.summary.confusion_members),
    kept until the project changes: finding them reads every object (seconds at ten million), and the cell stays
    selected while the page runs again."""
    return _confusion_cell(str(project.folder), model, split, true, predicted, project_state(project))


@st.cache_data(show_spinner=False, max_entries=8)
def _confusion_cell(folder: str, model: str, split: str, true: str, predicted: str, state: str) -> pd.Index:
    from hibug_core.objects.summary import confusion_members, evaluated_objects

    members = confusion_members(evaluated_objects(_samples(folder, model, state), split))
    return members.index[(members["true"] == true) & (members["predicted"] == predicted)]


def current_task(project: Project) -> Task:
    """The project's task: its nouns, views and capabilities for every caption, column and form."""
    return task_of(project)


def chosen_folder() -> str:
    """The folder of the served project this session looks at ('' where none is chosen yet). A single-project server
    shows its project; a projects root offers its projects by name (also from the link's ?project=NAME). A name the
    server does not serve gets one message, whatever the server's disk holds."""
    policy = server_policy()
    require_visitor()
    viewer_note()
    if policy.project is not None:
        asked = st.query_params.get("project")
        if asked:
            policy.project_folder(asked)  # NotServed unless it names this project
        with st.sidebar:
            st.caption(f"Project: **{plain(policy.project.name)}**")
        return str(policy.project)
    served = policy.served_projects()
    if NEXT_PROJECT_KEY in st.session_state:  # a project just created: open it
        st.session_state[KEPT + PROJECT_KEY] = st.session_state.pop(NEXT_PROJECT_KEY)
        for note in st.session_state.pop(IMPORT_NOTES_KEY, []):
            st.toast(plain(note), icon=":material/info:", duration="long")
    asked = st.query_params.get("project")
    if asked and asked != st.session_state.get(KEPT + PROJECT_KEY):
        policy.project_folder(asked)  # NotServed (and a line in the server's log) unless it names a served one
        st.session_state[KEPT + PROJECT_KEY] = asked
    if st.session_state.get(KEPT + PROJECT_KEY) not in served:
        st.session_state[KEPT + PROJECT_KEY] = None
    names = list(served)
    name = sidebar_value(st.selectbox, "Project", PROJECT_KEY, None, options=names, index=None,
                         placeholder="Choose a project" if names else "No projects yet",
                         help=f"The projects this server serves ({len(names)}).")
    if name is None:
        st.query_params.pop("project", None)
        return ""
    st.query_params["project"] = name
    return str(served[name])


def current_project(folder: str | None = None) -> Project:
    """The project chosen in the sidebar (or `folder`, already read from it); stops the page with a clear message
    when there is none."""
    folder = chosen_folder() if folder is None else folder
    if not folder:
        st.info("Choose a project in the sidebar." if server_policy().projects_root is not None else
                "This dashboard serves no project: start it with `hibug serve PROJECT`, "
                "`hibug serve --projects-root DIR` or `hibug demo`.")
        st.stop()
    try:
        project = open_project(folder)
    except HibugError as error:
        st.error(plain(error))
        st.stop()
    if project.read_only and not server_policy().read_only:
        st.info("This project is open read-only (its folder cannot be written): you can look at everything, "
                "but edits, tagging and jobs are refused. Copy it somewhere writable to change it.",
                icon=":material/lock:")
    return project


@contextlib.contextmanager
def shown_as_messages():
    """Around a page: hibug's own errors, and a database that fails while in use, are shown as messages that say
    what to do, never as tracebacks."""
    try:
        yield
    except HibugError as error:
        st.error(plain(error))
    except Exception as error:
        message = environment_failure(error)
        if message is None:
            raise
        st.error(plain(message[0].upper() + message[1:]))


def current_model(project: Project) -> str | None:
    """The model under test, picked in the sidebar: each model followed by its repaired versions, indented under it."""
    from hibug_core.repair.names import grouped

    models = grouped(project.models())
    if not models:
        return None
    if st.session_state.get(KEPT + MODEL_KEY) not in models:
        st.session_state[KEPT + MODEL_KEY] = models[0]
    return sidebar_value(st.selectbox, "Model under test", MODEL_KEY, models[0], options=models,
                         format_func=model_label)


def model_label(model: str) -> str:
    """How the picker shows a model: a repaired one as "↳ repair 3 hibug s0", indented under its parent (a function
    of the module, not a lambda: the session state is pickled)."""
    from hibug_core.repair.names import repair_label

    label = repair_label(model)
    return f"   ↳ {label}" if label else model


def required_model(project: Project) -> str:
    """The model under test, for pages that need model outputs; stops the page with what to do when there is none."""
    model = current_model(project)
    if model is None:
        st.warning("This project has no model outputs yet: run your model on its images (Overview, \"Run your own "
                   "model on these images\", or `hibug predict`), or import a manifest with predictions.")
        st.stop()
    return model


def current_user() -> str:
    """Who is acting: the signed-in identity where the server has sign-in, else the name entered in the sidebar
    (marked as not signed in on a server shared without sign-in)."""
    actor = require_visitor()
    if sign_in_required():
        return actor.identity
    from hibug_core.store.audit import default_actor

    remembered = unquote(st.context.cookies.get(USER_COOKIE, "")) if st.context.cookies else ""
    typical = "" if server_policy().shared else default_actor()  # never the server's account for a visitor
    name = sidebar_value(st.text_input, "Your name", USER_KEY, remembered or typical, max_chars=80,
                         help="Every change you make is recorded under this name; this browser remembers it.")
    if st.session_state.pop(REMEMBER_KEY, False):
        # Kept in a cookie so the next tab or visit from this browser starts with it (JSON-quoted: never markup).
        quoted = json.dumps(name).replace("<", "\\u003c").replace(">", "\\u003e")  # no way out of the script
        st.html(f"<script>document.cookie = {json.dumps(USER_COOKIE + '=')} + encodeURIComponent({quoted})"
                " + '; path=/; max-age=31536000; SameSite=Lax';</script>", unsafe_allow_javascript=True)
    return visitor().identity


def slice_report(project: Project, model: str, split: str, config, tags: str = "in force"):
    """The ranked, diagnosed error slices; recomputed only when the settings or the project change (and read from
    the project's files, where a process that computed them before kept them)."""
    report = _slice_report(str(project.folder), model, split, config, project_state(project), tags)
    return dataclasses.replace(report, **{name: getattr(report, name).copy(deep=False) for name in
                                          ("slices", "rare_classes", "evaluation", "samples", "all_tags")})


def false_positives_apart(project: Project, model: str, split: str, config, tags: str = "in force"):
    """An object model's false positives and the slices where they gather (slices.false_positives); recomputed only
    when the settings or the project change."""
    return _false_positives(str(project.folder), model, split, config, project_state(project), tags)


@st.cache_resource(show_spinner="Measuring the false positives…", max_entries=4)
def _false_positives(folder: str, model: str, split: str, config, state: str, tags: str):
    from hibug_core.slices.report_files import kept_false_positives

    del state
    return kept_false_positives(open_project(folder), model, split=split, config=config, tags=tags)


@st.cache_resource(show_spinner="Finding error slices…", max_entries=8)  # shared, not unpickled on every rerun
def _slice_report(folder: str, model: str, split: str, config, state: str, tags: str):
    from hibug_core.slices.report_files import kept_error_slices

    del state
    return kept_error_slices(open_project(folder), model, split=split, config=config, tags=tags)


def model_comparison(project: Project, models: tuple[str, ...], split: str, slices, config, tags: str = "in force"):
    """Models compared slice by slice (slices.compare); recomputed only when the settings or the project change (and
    read from the project's files, where a process that compared them before kept them)."""
    return _model_comparison(str(project.folder), tuple(models), split, slices, config, tags, project_state(project))


@st.cache_resource(show_spinner="Comparing the models…", max_entries=6)  # shared, never mutated by a page
def _model_comparison(folder: str, models: tuple[str, ...], split: str, slices, config, tags: str, state: str):
    from hibug_core.slices.kept_comparisons import kept_comparison

    del state
    return kept_comparison(open_project(folder), list(models), split=split, slices=slices, config=config, tags=tags)


def error_shifts(project: Project, comparison, candidate: str) -> pd.DataFrame:
    """slices.compare.error_mix_shifts of a comparison's baseline and `candidate`, kept until the project or the
    comparison changes (two hundred slices counted over eight million shared objects: 12 s, on every Compare run
    before)."""
    return _error_shifts(str(project.folder), project_state(project), comparison.identity, candidate,
                         comparison).copy(deep=False)


@st.cache_resource(show_spinner=False, max_entries=4)
def _error_shifts(folder: str, state: str, identity: str, candidate: str, _comparison) -> pd.DataFrame:
    from hibug_core.slices.compare import error_mix_shifts

    del identity
    types = {m: _samples(folder, m, state)["error_type"] for m in (_comparison.baseline, candidate)}
    return error_mix_shifts(_comparison, types, candidate)


def source_ranking(project: Project):
    """Every tag source of every attribute of the newest schema, measured (tagging.sources.SourceRanking)."""
    return _source_ranking(str(project.folder), project_state(project))


@st.cache_data(show_spinner=False, max_entries=8)
def _source_ranking(folder: str, state: str):
    from hibug_core.store.attribute_versions import schema_names
    from hibug_core.tagging.sources import rank_sources

    del state
    project = open_project(folder)
    return rank_sources(project, schema_names(project))


def keypoint_skeleton(project: Project) -> dict:
    """The keypoint names and limbs a person's skeleton is drawn and listed with (empty for boxes)."""
    return _keypoint_skeleton(str(project.folder), project_state(project))


@st.cache_data(show_spinner=False, max_entries=8)
def _keypoint_skeleton(folder: str, state: str) -> dict:
    del state
    return open_project(folder).keypoint_skeleton()


def tag_table(project: Project):
    """The tags in force (TagTable)."""
    table = _tag_table(str(project.folder), project_state(project))
    return dataclasses.replace(table, **{name: getattr(table, name).copy(deep=False) for name in
                                         ("tags", "score", "margin", "corrected") if getattr(table, name) is not None},
                               source=dict(table.source))


@st.cache_resource(show_spinner=False, max_entries=4)
def _tag_table(folder: str, state: str):
    from hibug_core.store.attribute_versions import latest_version
    from hibug_core.store.tag_store import TagTable
    from hibug_core.tagging.run import current_tags

    del state
    project = open_project(folder)
    if latest_version(project) is None:  # no attributes yet: no tags, rather than an error on every page
        empty = pd.DataFrame(index=project.samples().index)
        return TagTable(empty, empty, empty)
    return current_tags(project)


def secret(name: str) -> str | None:
    """A value from Streamlit secrets (secrets.toml or the hosting platform), else from the environment."""
    try:
        value = st.secrets.get(name)
    except (FileNotFoundError, StreamlitSecretNotFoundError):
        value = None
    value = value or os.environ.get(name)
    remember_secret(value if isinstance(value, str) else None)  # hidden wherever it could show (redaction)
    return value


def flagged_attribute(poor: dict[str, str], name: str) -> str:
    """How an attribute picker shows an attribute whose tags are too poor to trust (tagging.sources.too_poor): flagged
    as everywhere else. Bound with functools.partial, never a lambda: the session state is pickled."""
    return f"⚠ {name} (tags too poor to trust)" if name in poor else name


def flagged_tag(poor: dict[str, str], option: str) -> str:
    """How a tag picker shows "attribute = tag" when the attribute's tags are too poor to trust (as flagged_attribute;
    other options, such as "any tag", as they are)."""
    attribute = option.split(" = ", 1)[0]
    return f"⚠ {option} (tags too poor to trust)" if " = " in option and attribute in poor else option
