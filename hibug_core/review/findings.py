"""The current findings as a report a teammate can read and reproduce: a self-contained HTML page (slices with their
statistics, bug types, evidence, thumbnails, review status and comments), Markdown and CSV; every text escaped."""
from __future__ import annotations

import html
import json
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from hibug_core.csv_export import csv_text
from hibug_core.errors import HibugError
from hibug_core.llm.client import image_data_url
from hibug_core.markdown import cell as _md
from hibug_core.repair.names import families
from hibug_core.review.board import comments, reviews
from hibug_core.safe_files import write_output
from hibug_core.slices.report import one_row_per_bug, trust_note
from hibug_core.store.audit import now
from hibug_core.tasks import task_of

THUMBNAIL_SIDE = 96  # pixels: the report's thumbnails are embedded, so they stay small
COLUMNS = ["rank", "slice", "count", "score", "gap", "score_low", "score_high", "q_value", "bug_type", "reason",
           "trust", "also", "review_status", "assignee", "comments"]


def provenance(project, report) -> dict:
    """What a teammate needs to reproduce the findings: models, attribute version, tags, settings, versions."""
    from hibug_core import __version__
    from hibug_core.store.attribute_versions import latest_version
    from hibug_core.store.tag_store import tags_version

    return {"project": project.name, "model": report.model, "models": families(project.models()), "split": report.split,
            "attribute_version": latest_version(project), "tags": tags_version(project),
            "task": project.task, "slice_settings": asdict(report.config), "evaluated": len(report.evaluation),
            "overall_score": round(report.overall_score, 4), "hibug": __version__, "created_at": now()}


def findings(project, report, *, top: int = 20) -> pd.DataFrame:
    """The top bugs, one row each (the slices that repeat one folded under it as `also`), with their statistics,
    diagnosis, a flag when their tags are too poor to trust, and review (status, assignee, comment count)."""
    slices = one_row_per_bug(report.slices).head(top)
    board = reviews(project)
    board = board[board["target_kind"] == "slice"].set_index("target_key")
    table = pd.DataFrame({
        "rank": slices["rank"].to_numpy(), "slice_id": slices["slice_id"].to_numpy(),
        "slice": slices["description"].to_numpy(), "count": slices["count"].to_numpy(),
        "score": slices["score"].to_numpy(), "gap": slices["gap"].to_numpy(),
        "score_low": slices["score_low"].to_numpy(), "score_high": slices["score_high"].to_numpy(),
        "q_value": slices["q_value"].to_numpy(), "bug_type": slices["bug_type"].to_numpy(),
        "reason": slices["reason"].to_numpy(),
        "trust": [trust_note(row) for _, row in slices.iterrows()],
        "also": ["; ".join(members) for members in slices["members"]]})
    reviewed = [s in board.index for s in table["slice_id"]]
    table["review_id"] = pd.Series([int(board.at[s, "id"]) if r else None for s, r in zip(table["slice_id"], reviewed)],
                                   dtype=object)
    table["review_status"] = [board.at[s, "status"] if r else "not reviewed"
                              for s, r in zip(table["slice_id"], reviewed)]
    assignees = [board.at[s, "assignee"] if r else None for s, r in zip(table["slice_id"], reviewed)]
    table["assignee"] = pd.Series([a if isinstance(a, str) else None for a in assignees], dtype=object)
    table["comments"] = [int(board.at[s, "comments"]) if s in board.index else 0 for s in table["slice_id"]]
    return table


def report_csv(table: pd.DataFrame) -> bytes:
    return csv_text(table[COLUMNS]).encode()


def report_markdown(project, report, table: pd.DataFrame) -> str:
    meta = provenance(project, report)
    nouns = task_of(project).nouns
    lines = [f"# Findings: {_md(meta['project'])}", "",
             f"{_md(meta['model'])} on {_md(meta['split'])}: score {meta['overall_score']:.1%} over "
             f"{nouns.count(meta['evaluated'])}. Attribute version {meta['attribute_version']}, tags "
             f"{_md(meta['tags'])}, hibug {meta['hibug']}, {meta['created_at']}.", "",
             "Slice settings: " + ", ".join(f"{k} = {_md(v)}" for k, v in meta["slice_settings"].items()), "",
             f"| rank | slice | {nouns.samples} | score | 95% interval | q | bug type | review | assignee | comments |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for _, row in table.iterrows():
        lines.append(f"| {row['rank']} | {'⚠ ' if row['trust'] else ''}{_md(row['slice'])} | {row['count']} | "
                     f"{row['score']:.1%} | "
                     f"{row['score_low']:.0%}–{row['score_high']:.0%} | {row['q_value']:.1e} | "
                     f"{_md(row['bug_type'])} | "
                     f"{_md(row['review_status'])} | {_md(row['assignee'] or '')} | {row['comments']} |")
    for _, row in table.iterrows():
        lines += ["", f"## {row['rank']}. {_md(row['slice'])}", "", f"{_md(row['bug_type'])}: {_md(row['reason'])}"]
        lines += ["", f"**{_md(row['trust'])}**"] if row["trust"] else []
        lines += ["", f"Also the same bug: {_md(row['also'])}"] if row["also"] else []
        if row["review_id"] is not None and row["comments"]:
            for _, c in comments(project, int(row["review_id"])).iterrows():
                lines.append(f"> {_md(c['author'])} ({c['created_at']}): {_md(c['body'])}")
    return "\n".join(lines) + "\n"


_STYLE = """body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:70rem;color:#222}
table{border-collapse:collapse;width:100%}td,th{border:1px solid #ddd;padding:.3rem .5rem;text-align:left}
th{background:#f4f4f4}.slice{border:1px solid #ddd;border-radius:.5rem;padding:1rem;margin:1rem 0}
.grid img{margin:2px;border:2px solid #2b8a3e}.grid img.wrong{border-color:#d9480f}
.comment{white-space:pre-wrap;background:#f8f8f8;padding:.5rem;margin:.3rem 0}small{color:#666}"""


def report_html(project, report, table: pd.DataFrame, *, thumbnails: int = 12) -> str:
    """One self-contained page (inline style, images as data URLs); all text escaped."""
    e = html.escape
    meta = provenance(project, report)
    nouns = task_of(project).nouns
    samples = report.samples
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>Findings: {e(meta['project'])}</title>"
             f"<style>{_STYLE}</style></head><body>", f"<h1>Findings: {e(meta['project'])}</h1>",
             f"<p>{e(meta['model'])} on {e(meta['split'])}: score {meta['overall_score']:.1%} over "
             f"{nouns.count(meta['evaluated'])}.</p>",
             "<h2>Reproduce</h2><pre>" + e(json.dumps(meta, indent=2, default=str, ensure_ascii=False), quote=False)
             + "</pre>",
             f"<h2>Error slices</h2><table><tr><th>rank</th><th>slice</th><th>{nouns.samples}</th><th>score</th>"
             "<th>95% interval</th><th>q</th><th>bug type</th><th>review</th><th>assignee</th></tr>"]
    for _, row in table.iterrows():
        parts.append(f"<tr><td>{row['rank']}</td><td>{'⚠ ' if row['trust'] else ''}{e(row['slice'])}</td>"
                     f"<td>{row['count']}</td>"
                     f"<td>{row['score']:.1%}</td><td>{row['score_low']:.0%}–{row['score_high']:.0%}</td>"
                     f"<td>{row['q_value']:.1e}</td><td>{e(row['bug_type'])}</td><td>{e(row['review_status'])}</td>"
                     f"<td>{e(row['assignee'] or '')}</td></tr>")
    parts.append("</table>")
    for _, row in table.iterrows():
        parts.append(f"<div class='slice'><h3>{row['rank']}. {e(row['slice'])}</h3>"
                     f"<p><b>{e(row['bug_type'])}</b>: {e(row['reason'])}</p>"
                     + (f"<p class='trust'><b>{e(row['trust'])}</b></p>" if row["trust"] else "")
                     + (f"<p><small>Also the same bug: {e(row['also'])}</small></p>" if row["also"] else ""))
        ids = report.sample_ids(row["slice_id"])[:thumbnails]
        images = []
        for sample_id in ids:
            item = samples.loc[sample_id]
            wrong = bool(report.evaluation.at[sample_id, "error"] > 0.5)
            caption = f"{item['label']} → {item['prediction']}"
            try:
                source = image_data_url(project.served_image(item["image_path"]), THUMBNAIL_SIDE)
                images.append(f"<img class='{'wrong' if wrong else 'right'}' src='{source}' "
                              f"title='{e(caption, quote=True)}' alt='{e(caption, quote=True)}'>")
            except (OSError, HibugError):
                images.append(f"<small>missing image {e(str(item['image_path']))}</small>")
        parts.append("<div class='grid'>" + "".join(images) + "</div><small>failures first, orange border: "
                     "wrong</small>")
        parts.append(f"<p>Review: {e(row['review_status'])}"
                     + (f", assigned to {e(row['assignee'])}" if row["assignee"] else "") + "</p>")
        if row["review_id"] is not None:
            for _, c in comments(project, int(row["review_id"])).iterrows():
                parts.append(f"<div class='comment'><small>{e(c['author'])} · {e(c['created_at'])}</small>\n"
                             f"{e(c['body'])}</div>")
        parts.append("</div>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(project, output: str | Path, *, model: str | None = None, split: str = "val", top: int = 20):
    """Find the error slices and write the findings to `output` (.html, .md or .csv, by its suffix); returns
    (slice report, findings table). A folder that does not exist is refused before any work."""
    from hibug_core.slices.report import error_slices

    output = Path(output)
    kind = output.suffix.lower().lstrip(".")
    if kind not in ("html", "md", "csv"):
        raise HibugError(f"write the report to a .html, .md or .csv file, not '{output}'")
    if output.is_dir() or not output.parent.is_dir():  # refused before any work, in write_output's words
        write_output(output, b"", what="the report")
    report = error_slices(project, model, split=split)
    table = findings(project, report, top=top)
    text = (report_html(project, report, table) if kind == "html" else
            report_markdown(project, report, table) if kind == "md" else report_csv(table))
    write_output(output, text, what="the report")
    return report, table
