"""The benchmark's tables (overall, per bug type and strength, per C, how problems were generated), as Markdown and
JSON files."""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from hibug_core.bench.problems import HARD, RARE, SHIFT, SPURIOUS
from hibug_core.bench.scoring import HIBUG2_SEARCH, HIBUG_SEARCH


def markdown_table(frame: pd.DataFrame) -> str:
    """A DataFrame as a GitHub Markdown table (index included when named)."""
    if frame.index.name or any(frame.index.names):
        frame = frame.reset_index()
    cells = [[_cell(v) for v in row] for row in frame.itertuples(index=False)]
    header = [str(c) for c in frame.columns]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in cells]
    return "\n".join(lines)


def _cell(value) -> str:
    if isinstance(value, float):
        return "" if np.isnan(value) else f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return str(value)


def _rates(group: pd.DataFrame) -> pd.Series:
    typed = group["type_right"].dropna()
    ranks = group["first_rank"].dropna()
    return pd.Series({
        "problems": len(group),
        "Find Attr %": 100 * group["find_attr"].mean(),
        "Find Tag %": 100 * group["find_tag"].mean(),
        "bug type right %": 100 * typed.astype(bool).mean() if len(typed) else np.nan,
        "median first rank": ranks.median() if len(ranks) else np.nan,
        # HiBug's Table 1 measures: in any reported slice, whatever its bug type (rows scored before them lack them)
        **({"Find Attr. (HiBug's) %": 100 * group["paper_find_attr"].mean(),
            "Find Des. (HiBug's) %": 100 * group["paper_find_des"].mean()} if "paper_find_des" in group else {}),
        # HiBug's §4.1 for rare cases: the name or a sub-case (rare-case problems only)
        **({"name or sub-case (HiBug's) %": 100 * group["paper_name_or_sub_case"].dropna().astype(bool).mean()}
           if "paper_name_or_sub_case" in group and group["paper_name_or_sub_case"].notna().any() else {}),
    })


def summary_tables(rows: pd.DataFrame, problems: pd.DataFrame, gap: float,
                   parent_alpha: float) -> dict[str, pd.DataFrame]:
    """Scores at C = `gap` and the parent test's `parent_alpha` per tag source and bug type (and all), per strength,
    per attribute; every setting tried; how the problems were generated; where HiBug's rule was scored too, both
    searches side by side; and, when the slices were searched on shares of the validation split, the scores per share.
    The other tables are hibug's search on the largest share."""
    rows_all = rows
    search = rows["search"] if "search" in rows else pd.Series(HIBUG2_SEARCH, index=rows.index)
    share = rows["val_share"] if "val_share" in rows else pd.Series(1.0, index=rows.index)
    ours, whole, at_c = search == HIBUG2_SEARCH, share == share.max(), np.isclose(rows["gap"], gap)
    at_setting = rows[ours & at_c & np.isclose(rows["parent_alpha"], parent_alpha)]
    searches = pd.concat([at_setting, rows[~ours & at_c]])[lambda frame: whole.loc[frame.index]]
    at_gap, rows = at_setting[whole.loc[at_setting.index]], rows[whole & ours]
    both = pd.concat([at_gap, at_gap.assign(bug_type="all")])
    tables = {
        "scores": both.groupby(["tagger", "bug_type"], sort=False).apply(_rates, include_groups=False),
        "by strength": at_gap.groupby(["tagger", "bug_type", "strength"], sort=False)
                             .apply(_rates, include_groups=False),
        "by attribute": at_gap.groupby(["tagger", "attribute"], sort=False).apply(_rates, include_groups=False),
        "by C and parent test": rows.groupby(["tagger", "gap", "parent_alpha"], sort=False)
                                    .apply(_rates, include_groups=False),
    }
    correlations = searches[searches["bug_type"].eq(SPURIOUS) & searches.get("correlation_find_des",
                                                                             searches["bug_type"]).notna()]
    if "correlation_find_des" in searches and len(correlations):  # HiBug's Table 1 the paper's way: correlation
        # problems, the correlations each search reports
        correlations = correlations.assign(search=search.loc[correlations.index].to_numpy())
        tables["HiBug's Table 1, the paper's way"] = correlations.groupby(["tagger", "search"], sort=False).agg(
            problems=("problem", "size"), **{"Find Attr. %": ("correlation_find_attr", lambda v: 100 * v.mean()),
                                             "Find Des. %": ("correlation_find_des", lambda v: 100 * v.mean())})
    if search.nunique() > 1:
        tables["by search"] = searches.groupby(["tagger", "search"], sort=False).apply(_rates, include_groups=False)
    if share.nunique() > 1:
        tables["by validation share"] = at_setting.groupby(["tagger", "val_share"]).apply(
            lambda group: pd.concat([pd.Series({"val images": group["val_images"].median()}),
                                     _rates(group)]), include_groups=False)
        counted = rows_all[(search == HIBUG_SEARCH) & rows_all.get("error_slices", pd.Series(dtype=float)).notna()] \
            if "error_slices" in rows_all else rows_all.iloc[:0]
        if len(counted):  # HiBug's Table 6: error slices (at or below the overall score) per validation size
            tables["error slices by validation share (HiBug's Table 6)"] = counted.groupby(["tagger", "val_share"]).agg(
                **{"val images": ("val_images", "median"), "problems": ("problem", "nunique"),
                   "median error slices": ("error_slices", "median")})
    if len(problems):
        kept_drop = problems["drop"].where(problems["kept"].astype(bool))
        tables["generation"] = problems.assign(kept_drop=kept_drop).groupby(["bug_type", "strength"]).agg(
            tried=("kept", "size"), kept=("kept", "sum"), **{"median drop of kept": ("kept_drop", "median")})
    for name, table in list(tables.items()):
        if isinstance(table, pd.Series):  # groups whose rates carry different measures come back stacked
            tables[name] = table = table.unstack()
        for column in ("problems", "tried", "kept", "val images"):
            if column in table:
                table[column] = table[column].astype(int)
    return tables


def write_results(folder: Path, result, tables: dict[str, pd.DataFrame], taggers) -> tuple[Path, Path]:
    """results.md (the tables and what each tag source is) and results.json (config, timings, every row)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["# Planted-bug benchmark", "",
             f"{int((result.problems['kept']).sum()) if len(result.problems) else 0} problems "
             f"({result.config.n_spurious} {SPURIOUS}, {result.config.n_rare} {RARE}, {result.config.n_shift} {SHIFT}, "
             f"{result.config.n_hard} {HARD} wanted) from "
             f"{len(result.problems)} candidates; top {result.config.top_n} slices; C = {result.config.slices.gap}, "
             f"parent test at {result.config.slices.parent_test}; "
             f"{result.timings.get('total', 0):.0f} s in total.", "", "Tag sources:", ""]
    lines += [f"- `{e.name}`: {e.help}" for e in taggers if e.name in result.config.taggers]
    for name, table in tables.items():
        lines += ["", f"## {name}", "", markdown_table(table)]
    lines += ["", "## time (s)", "", markdown_table(pd.DataFrame(
        {"stage": list(result.timings), "seconds": [round(v, 1) for v in result.timings.values()]}))]
    markdown = folder / "results.md"
    markdown.write_text("\n".join(lines) + "\n", encoding="utf-8")
    payload = {"config": asdict(result.config), "timings": result.timings,
               "tables": {k: json.loads(v.reset_index().to_json(orient="records")) for k, v in tables.items()},
               "rows": json.loads(result.rows.to_json(orient="records")),
               "problems": json.loads(result.problems.to_json(orient="records")),
               "finder_bugs": json.loads(result.finder_bugs.to_json(orient="records")),
               "finder_problems": json.loads(result.finder_problems.to_json(orient="records"))}
    data = folder / "results.json"
    data.write_text(json.dumps(payload, indent=1, default=str), encoding="utf-8")
    return markdown, data
