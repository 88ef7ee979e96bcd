"""Multimodal-LLM tagging (HiBug2): one request per image returns every attribute's tag as JSON; answers are
validated against the tag lists, stored as they arrive, and a stopped run resumes where it ended."""
from __future__ import annotations

import itertools
import json
import logging
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

import numpy as np
import pandas as pd
from sqlalchemy import bindparam, text

from hibug_core.attributes.schema import Attribute
from hibug_core.errors import TaggingError
from hibug_core.llm.client import LLMConfig, LLMUnavailable, ask, image_data_url, make_client, parse_json_reply
from hibug_core.objects.views import SampleViews
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.store import tag_store
from hibug_core.store.attribute_versions import latest_version, load_schema
from hibug_core.store.db import read_connection, write_transaction
from hibug_core.tagging.choice import chosen_attributes, prompt_labels
from hibug_core.values import ValueRefused, normalise_value, shown

logger = logging.getLogger(__name__)

STORE_EVERY_S = 1.0  # answers are committed at least this often (and every 16)
HEARTBEAT_S = 5.0  # while no answer comes, progress says how long it has been waiting
SYSTEM_PROMPT = ("You label images for a tool that debugs computer-vision models. For every attribute you are given, "
                 "choose exactly one of its tags, written exactly as listed. Answer with one JSON object only.")

MLLM = "mllm"  # the tagging method of a run a multimodal LLM answers (a TAGGERS entry)


OBJECT_VIEWS = ("The first image is one object, outlined in blue, with some of its surroundings; the second is its "
                "whole image with the same outline. Judge the object's own attributes on it, the background and the "
                "scene on the whole image.")


def request_text(attributes: list[Attribute], label: str | None, *, an_object: bool = False) -> str:
    shown = f"The outlined object is a {label}." if an_object and label else \
        f"The image shows a {label}." if label else "Look at the image."
    lines = [*([OBJECT_VIEWS] if an_object else []), shown,
             "Give the tag of each attribute as a JSON object mapping attribute name to tag:"]
    lines += [f'- "{a.name}": one of {json.dumps(list(a.tags))}' for a in attributes]
    return "\n".join(lines)


def response_schema(attributes: list[Attribute]) -> dict:
    """A JSON schema for structured outputs: every attribute required, its value one of its tags."""
    return {"type": "json_schema", "json_schema": {"name": "image_tags", "strict": True, "schema": {
        "type": "object", "additionalProperties": False, "required": [a.name for a in attributes],
        "properties": {a.name: {"type": "string", "enum": list(a.tags)} for a in attributes}}}}


def validate_answer(answer: dict, attributes: list[Attribute]) -> dict[str, str]:
    """attribute -> tag, matching tags case-insensitively; ValueError listing everything that is wrong."""
    problems, tags = [], {}
    lowered = {}
    for key, value in answer.items():
        try:
            lowered[(normalise_value(key) or "").casefold()] = normalise_value(value, "tag")
        except ValueRefused as error:
            problems.append(f'"{key}": {shown(value)} {error}')
    for attribute in attributes:
        value = lowered.get(attribute.name.casefold())
        if value is None:
            if not any(p.startswith(f'"{attribute.name}"') for p in problems):
                problems.append(f'"{attribute.name}" is missing')
            continue
        match = {t.casefold(): t for t in attribute.tags}.get(value.casefold())
        if match is None:
            problems.append(f'"{attribute.name}": "{value}" is not one of {list(attribute.tags)}')
        else:
            tags[attribute.name] = match
    if problems:
        raise ValueError("; ".join(problems))
    return tags


def object_boxes(objects) -> dict[int, tuple]:
    """Each object's box (x, y, w, h) by sample id, for the rows whose box is known (an image row has none)."""
    boxes = objects[["box_x", "box_y", "box_w", "box_h"]].to_numpy(float)
    return {int(i): tuple(b) for i, b in zip(objects.index, boxes) if np.isfinite(b).all()}


def sample_views(path: str, box) -> list[str]:
    """The images a sample is shown as: its image, or for an object (box: x, y, w, h) its outlined crop and its whole
    image with the outline (hibug_core.objects.crops)."""
    if box is None:
        return [image_data_url(path)]
    from hibug_core.image_loader import open_image
    from hibug_core.objects.crops import ObjectPicture, render_picture

    picture, image = ObjectPicture(tuple(box), None, "near miss"), open_image(path)
    return [image_data_url(render_picture(image, picture, size=320)),
            image_data_url(render_picture(image, picture, size=512, whole=True))]


def ask_image(client, config: LLMConfig, path: str, attributes: list[Attribute], label: str | None,
              box=None) -> dict[str, str]:
    """One image's (or with `box`, one object's) tags; invalid replies are asked again with the reason
    (LLMAnswerError after the last attempt), an unreachable server raises LLMUnavailable."""
    images = [{"type": "image_url", "image_url": {"url": url}} for url in sample_views(path, box)]
    messages = [{"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": [{"type": "text", "text": request_text(attributes, label,
                                                                                   an_object=box is not None)},
                                             *images]}]
    return ask(client, config, messages, parse=lambda content: validate_answer(parse_json_reply(content), attributes),
               format_hint="Answer again with one JSON object using only the listed tags.",
               response_format=response_schema(attributes))


def _answers(project, run_id: int) -> pd.DataFrame:
    with read_connection(project.engine) as connection:
        return pd.read_sql_query(text("SELECT sample_id, answer_json, error FROM mllm_answers WHERE run_id = :r"),
                                 connection, params={"r": run_id})


def _store_answers(project, run_id: int, rows: list[tuple[int, dict | None, str | None]]) -> None:
    if not rows:
        return
    with write_transaction(project.engine) as connection:
        connection.execute(text("DELETE FROM mllm_answers WHERE run_id = :r AND sample_id IN :ids").bindparams(
            bindparam("ids", expanding=True)), {"r": run_id, "ids": [r[0] for r in rows]})
        connection.execute(
            text("INSERT INTO mllm_answers (run_id, sample_id, answer_json, error) VALUES (:r, :s, :a, :e)"),
            [{"r": run_id, "s": s, "a": None if a is None else json.dumps(a), "e": e} for s, a, e in rows])


def resumable_run(project, model: str, attributes: list[Attribute]) -> int | None:
    """The newest unfinished (or partly failed) LLM run for the same model and attributes, if any."""
    runs = tag_store.runs(project)
    wanted = {a.name: list(a.tags) for a in attributes}
    for _, run in runs[runs["method"] == MLLM].sort_values("id", ascending=False).iterrows():
        if run["encoder"] == model and json.loads(run["attributes_json"]) == wanted:
            errors = _answers(project, int(run["id"]))["error"].notna().any()
            return int(run["id"]) if run["status"] != "finished" or errors else None
    return None


def tag_with_llm(project, config: LLMConfig = LLMConfig(), *, views: SampleViews, attributes: list[str] | None = None,
                 sample_ids=None, api_key: str | None = None, resume: bool = True,
                 progress: ProgressCallback = no_progress, author: str | None = None) -> int:
    """Tag samples with a multimodal LLM, shown as the task's `views` say (an object outlined on its image, with its
    crop); returns the run id. Answers are stored as they arrive; a server that is down ends the run with a clear
    message, keeping every answer and every tag stored before."""
    schema = load_schema(project)
    chosen = [a for a in chosen_attributes(schema, attributes) if not a.measured]
    if not chosen:
        raise TaggingError("no attribute to ask the model about (measured attributes are computed from pixels)")
    samples = project.samples(sample_ids=sample_ids)
    labels = dict(zip(samples.index, prompt_labels(project, samples, None)))
    boxes = {}  # outlined: a sample with a box is shown as its outlined crop and its whole image
    if views.outlined:
        boxes = object_boxes(project.objects().reindex(samples.index))
    client = make_client(config, api_key)
    run_id = resumable_run(project, config.model, chosen) if resume else None
    if run_id is None:
        run_id = tag_store.begin_run(project, method=MLLM, encoder=config.model,
                                     schema_version=latest_version(project),
                                     attributes={a.name: a.tags for a in chosen}, author=author)
    stored = _answers(project, run_id)
    done = set(stored.loc[stored["answer_json"].notna(), "sample_id"].astype(int))
    todo = [int(s) for s in samples.index if int(s) not in done]
    logger.info("LLM tagging run #%d: %d images to ask, %d answered before", run_id, len(todo), len(done))
    consecutive_down, down_reason, pending_rows, last_store = 0, None, [], time.monotonic()
    finished = len(done)
    progress("asking the multimodal model", finished, len(samples))
    with ThreadPoolExecutor(max_workers=config.concurrency) as pool:
        queue, running = iter(todo), {}

        def fill() -> None:  # keep `concurrency` requests in flight
            for sample_id in itertools.islice(queue, config.concurrency - len(running)):
                running[pool.submit(ask_image, client, config, samples.at[sample_id, "image_path"], chosen,
                                    labels[sample_id], boxes.get(sample_id))] = sample_id

        fill()
        waiting_since = time.monotonic()
        while running:
            completed, _ = wait(running, timeout=HEARTBEAT_S, return_when=FIRST_COMPLETED)
            if not completed:  # a silent server: say so while waiting, not minutes of nothing
                progress(f"asking the multimodal model: no answer for {time.monotonic() - waiting_since:.0f} s "
                         f"(a request is given up after {config.longest_wait_s():.0f} s)", finished, len(samples))
                continue
            waiting_since = time.monotonic()
            for future in completed:
                sample_id = running.pop(future)
                try:
                    pending_rows.append((sample_id, future.result(), None))
                    consecutive_down = 0
                except LLMUnavailable as error:
                    consecutive_down += 1
                    down_reason = str(error)
                    pending_rows.append((sample_id, None, down_reason))  # retried when the run resumes
                    continue
                except (ValueError, OSError) as error:
                    pending_rows.append((sample_id, None, str(error)))
                finished += 1
                progress("asking the multimodal model", finished, len(samples))
            if consecutive_down >= config.abort_after:
                for future in running:
                    future.cancel()
                break
            # Commit answers often, so a killed worker loses at most the requests in flight.
            if len(pending_rows) >= 16 or (pending_rows and time.monotonic() - last_store > STORE_EVERY_S):
                _store_answers(project, run_id, pending_rows)
                pending_rows, last_store = [], time.monotonic()
            fill()
    _store_answers(project, run_id, pending_rows)
    stored = _answers(project, run_id)
    answered = stored[stored["answer_json"].notna()]
    if consecutive_down >= config.abort_after or (down_reason and answered.empty):
        message = (f"{down_reason}. Check that the server is running and that base URL and model are right. "
                   f"{len(answered)} image(s) answered in run #{run_id} are kept; run again to resume. "
                   "Tags stored before are unchanged.")
        tag_store.fail_run(project, run_id, message)
        raise TaggingError(message)
    if answered.empty:
        message = (f"the model gave no valid answer for any of {len(stored)} image(s) "
                   f"(e.g. {stored['error'].dropna().iloc[0] if stored['error'].notna().any() else 'no reply'}); "
                   "tags stored before are unchanged")
        tag_store.fail_run(project, run_id, message)
        raise TaggingError(message)
    ids = samples.index.to_numpy(np.int64)
    position = pd.Index(ids).get_indexer(answered["sample_id"].astype(int).to_numpy())
    tag_index = np.full((len(ids), len(chosen)), -1, dtype=np.int16)
    for row, raw in zip(position, answered["answer_json"]):
        answer = json.loads(raw)
        tag_index[row] = [a.tags.index(answer[a.name]) for a in chosen]
    confidence = np.where(tag_index >= 0, 1.0, np.nan).astype(np.float32)  # the LLM gives no probability
    tag_store.finish_run(project, run_id, tag_store.TagResult(ids, {a.name: a.tags for a in chosen}, tag_index,
                                                              confidence, confidence), author=author)
    failed = int(stored["error"].notna().sum())
    if failed:
        logger.warning("%d image(s) got no valid answer; run again to retry them", failed)
    return run_id
