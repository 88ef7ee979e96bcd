"""A model comparison written for people and for CI: the slice table as CSV, Markdown or a self-contained HTML page, and
the gate's verdict as JUnit XML (one test case per checked slice) and a Markdown summary to post on a pull request.
Every text is escaped for the format it lands in."""
from __future__ import annotations

import html
from pathlib import Path
from xml.etree import ElementTree

import pandas as pd

from hibug_core.csv_export import csv_text
from hibug_core.errors import HibugError
from hibug_core.markdown import cell as _md
from hibug_core.metrics import points
from hibug_core.safe_files import write_output
from hibug_core.slices.compare import ModelComparison

TABLE_COLUMNS = ["candidate", "description", "count", "baseline_score", "candidate_score", "difference", "p_value",
                 "q_value", "change", "repeats", "tag_warning"]
FORMATS = (".html", ".md", ".csv")


def comparison_table(comparison: ModelComparison, top: int | None = None) -> pd.DataFrame:
    """Overall, per class, then per slice, for every candidate: the columns a reader needs, regressions first."""
    overall = comparison.overall.iloc[1:].rename(columns={"model": "candidate", "n": "count"}).assign(
        description="overall", kind="overall", q_value=lambda f: f["p_value"], repeats="", tag_warning="")
    slices = comparison.slices.groupby("candidate", sort=False).head(top) if top else comparison.slices
    parts = [overall, comparison.classes.assign(kind="class", repeats="", tag_warning=""), slices.assign(kind="slice")]
    return pd.concat([p[["kind", *TABLE_COLUMNS]] for p in parts], ignore_index=True)


def _percent(value) -> str:
    return "" if pd.isna(value) else f"{value:.1%}"


def _rows_markdown(table: pd.DataFrame) -> list[str]:
    lines = ["| model | slice | samples | baseline | candidate | change | q |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for _, row in table.iterrows():
        lines.append(f"| {_md(row['candidate'])} | {_md(row['description'])} | {int(row['count']):,} | "
                     f"{_percent(row['baseline_score'])} | {_percent(row['candidate_score'])} | "
                     f"{points(row['difference'])} | {row['q_value']:.2g} |")
    return lines


def comparison_markdown(comparison: ModelComparison, title: str, top: int = 20) -> str:
    table = comparison_table(comparison, top)
    changed = table[(table["change"] != "no significant change") | (table["kind"] == "overall")]
    lines = [f"# {_md(title)}", "",
             f"Baseline **{_md(comparison.baseline)}** against {', '.join(_md(c) for c in comparison.candidates)} on "
             f"the {_md(comparison.split)} split: {comparison.shared:,} shared samples, {comparison.test}, "
             f"Benjamini-Hochberg q-values over the slices compared (significant at {comparison.config.alpha:g}).", ""]
    lines += _rows_markdown(changed) if len(changed) else ["No significant change."]
    return "\n".join(lines) + "\n"


def comparison_html(comparison: ModelComparison, title: str, top: int = 20) -> str:
    table = comparison_table(comparison, top)
    shown = table.assign(**{c: table[c].map(_percent) for c in ("baseline_score", "candidate_score")},
                         difference=table["difference"].map(points),
                         p_value=table["p_value"].map("{:.2g}".format), q_value=table["q_value"].map("{:.2g}".format))
    style = ("body{font-family:system-ui,sans-serif;margin:2em;color:#1f2937}table{border-collapse:collapse}"
             "td,th{border:1px solid #d1d5db;padding:4px 8px;text-align:left}tr.regression td{background:#fee2e2}"
             "tr.improvement td{background:#dcfce7}")
    rows = []
    for _, row in shown.iterrows():
        cells = "".join(f"<td>{html.escape(str(row[c]))}</td>" for c in TABLE_COLUMNS)
        rows.append(f'<tr class="{html.escape(str(row["change"]).split()[0])}">{cells}</tr>')
    head = "".join(f"<th>{html.escape(c)}</th>" for c in TABLE_COLUMNS)
    summary = (f"Baseline <b>{html.escape(comparison.baseline)}</b> on the {html.escape(comparison.split)} split: "
               f"{comparison.shared:,} shared samples, {html.escape(comparison.test)}, q-values over the "
               "slices compared.")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{style}</style></head><body><h1>{html.escape(title)}</h1><p>{summary}</p>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></body></html>\n")


def write_comparison(comparison: ModelComparison, output: str | Path, title: str, top: int = 20) -> Path:
    """The comparison as .csv (every row), .md or .html (overall, classes and the top slices per candidate)."""
    path = Path(output)
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise HibugError(f"write the comparison to a {', '.join(FORMATS)} file, not '{path.name}'")
    if suffix == ".csv":
        write_output(path, csv_text(comparison_table(comparison)), what="the comparison")
    else:
        write_output(path, (comparison_html if suffix == ".html" else comparison_markdown)(comparison, title, top),
                     what="the comparison")
    return path


def gate_markdown(comparison: ModelComparison, checked: pd.DataFrame, candidate: str) -> str:
    """The gate's verdict for a pull request: passed or failed, each failing check with its figures, the settings."""
    failed = checked[checked["failed"]]
    config = comparison.config
    distinct = failed["repeats"] == ""  # one per problem: the rest are the same samples named by other tags
    verdict = (f"**failed**: {int(distinct.sum())} significant regression(s)" if len(failed) else "**passed**")
    lines = [f"## hibug check: {_md(candidate)} against {_md(comparison.baseline)} ({_md(comparison.split)})", "",
             f"Gate {verdict}. {len(checked)} checks (overall, classes, slices of at least "
             f"{config.min_count or comparison.slice_config.min_support} samples) on {comparison.shared:,} "
             f"shared samples; a check fails when the candidate is worse with q <= {config.alpha:g} "
             f"({comparison.test}, Benjamini-Hochberg) by more than {100 * config.max_drop:g} points.", ""]
    if len(failed):
        lines += _rows_markdown(failed[distinct].assign(candidate=candidate))
        if not distinct.all():
            lines += ["", f"<details><summary>{int((~distinct).sum())} more failing slices repeat these (the same "
                      "samples named by other tags)</summary>", ""]
            lines += _rows_markdown(failed[~distinct].assign(candidate=candidate)) + ["", "</details>"]
    improved = checked[(checked["q_value"] <= config.alpha) & (checked["difference"] > 0)]
    if len(improved):
        lines += ["", f"{len(improved)} check(s) improved significantly, e.g. "
                  + "; ".join(f"{_md(r['description'])} {points(r['difference'])}"
                              for _, r in improved.head(3).iterrows())
                  + "."]
    return "\n".join(lines) + "\n"


def gate_junit(comparison: ModelComparison, checked: pd.DataFrame, candidate: str) -> bytes:
    """JUnit XML: one test suite, one test case per check, a failure on each significant regression."""
    suite = ElementTree.Element("testsuite", name=f"hibug check {candidate} vs {comparison.baseline}",
                                tests=str(len(checked)), failures=str(int(checked["failed"].sum())), errors="0")
    for _, row in checked.iterrows():
        case = ElementTree.SubElement(suite, "testcase", classname=f"hibug.{row['kind']}", name=row["description"])
        figures = (f"{int(row['count']):,} samples: {_percent(row['baseline_score'])} -> "
                   f"{_percent(row['candidate_score'])} ({points(row['difference'])}), p = {row['p_value']:.3g}, "
                   f"q = {row['q_value']:.3g}")
        if row["repeats"]:
            figures += f"; part of: {row['repeats']}"
        if row["tag_warning"]:
            figures += f"; tags too poor to trust: {row['tag_warning']}"
        if row["failed"]:
            failure = ElementTree.SubElement(case, "failure", message=f"significant regression: {figures}",
                                             type="regression")
            failure.text = figures
        else:
            ElementTree.SubElement(case, "system-out").text = figures
    root = ElementTree.Element("testsuites")
    root.append(suite)
    return ElementTree.tostring(root, encoding="utf-8", xml_declaration=True)
