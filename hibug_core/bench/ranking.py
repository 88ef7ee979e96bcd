"""One scoring for every slice finder on every task: how a ranked answer (hibug_core.bench.peers.Found) finds the bugs
planted in a problem, and what it reports where none was planted; each figure with a 95% interval over problems.

Definitions (docs/results.md, "Who finds bugs best"):
- a slice **finds** a planted bug when it names every one of the bug's conditions (attribute = tag), alone or with
  more conditions: the bug itself or a sub-case of it (HiBug's §4.1 counts "the name or a sub-case" of a rare case);
- **rank**: the position of the first slice that finds it (1 is first); **Find Tag at k**: a top-k slice finds it;
  **Find Attr at k**: a top-k slice names every planted attribute, whatever the tags (HiBug's Table 1 defines Find
  Attr. and Find Des. over any reported slice; hibug asks for the top k, as a reader reads a ranked list);
- **P@k**: the share of the top k slices (of those listed, when fewer) that find some planted bug; neither HiBug
  nor HiBug2 defines it (HiBug2 speaks of the "precision" of error slices without a formula), so it is said here;
- **recall at 10**: the share of a problem's planted bugs found in the top 10;
- **bug type right**: the first slice that finds a bug names its type (methods that name no type have none);
- on a **bug-free** problem, the slices the method reports by its own rule (each is a false finding)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hibug_core.bench.peers import Found
from hibug_core.stats import wilson_interval

KS = (10, 25)


@dataclass(frozen=True)
class PlantedBug:
    """A bug a problem planted: the slice it lives in (its conditions) and the type hibug should name ("" where it
    names none for such a bug)."""

    conditions: tuple[tuple[str, str], ...]
    bug_type: str

    def describe(self) -> str:
        return " & ".join(f"{a} = {t}" for a, t in self.conditions)


def same_name(attribute: str, planted: str) -> bool:
    return attribute == planted


def _finds(definition, bug: PlantedBug, same: Callable[[str, str], bool]) -> tuple[bool, bool]:
    """(the slice names every planted attribute, it names every planted condition)."""
    names = all(any(same(a, planted) for a, _ in definition) for planted, _ in bug.conditions)
    finds = all(any(same(a, planted) and str(t).lower() == tag.lower() for a, t in definition)
                for planted, tag in bug.conditions)
    return names, finds


def score_answer(found: Found, planted: list[PlantedBug], *, same: Callable[[str, str], bool] = same_name,
                 top: int = 10) -> tuple[list[dict], dict]:
    """Per planted bug: rank, Find Attr and Find Tag at `top`, bug type right; per problem: P@k for KS, recall at
    `top`, slices listed and reported."""
    judged = [[_finds(d, bug, same) for d in found.definitions] for bug in planted]
    bugs = []
    for bug, marks in zip(planted, judged):
        rank = next((r for r, (_, hit) in enumerate(marks, 1) if hit), None)
        typed = found.bug_types[rank - 1] if rank is not None and found.bug_types is not None else None
        bugs.append({"bug": bug.describe(), "bug_type": bug.bug_type, "rank": rank,
                     "find_attr": any(names for names, _ in marks[:top]),
                     "find_tag": rank is not None and rank <= top,
                     "type_right": None if typed is None or not bug.bug_type else typed == bug.bug_type})
    problem = {"listed": len(found.definitions), "reported": found.reported,
               "recall": float(np.mean([b["find_tag"] for b in bugs])) if bugs else np.nan}
    for k in KS:
        shown = found.definitions[:k]
        hits = [any(_finds(d, bug, same)[1] for bug in planted) for d in shown]
        problem[f"P@{k}"] = float(np.mean(hits)) if shown and planted else np.nan
    return bugs, problem


def _mean_interval(values: pd.Series, seed: int = 0, draws: int = 2000) -> tuple[float, float, float]:
    """Mean over problems and its 95% percentile-bootstrap interval (NaN where nothing was measured)."""
    values = values.dropna().to_numpy(float)
    if not len(values):
        return np.nan, np.nan, np.nan
    means = np.random.default_rng(seed).choice(values, (draws, len(values))).mean(axis=1)
    return float(values.mean()), float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def _share_interval(values: pd.Series) -> tuple[float, float, float]:
    """A share of planted bugs and its 95% Wilson interval."""
    values = values.dropna().astype(float)
    if not len(values):
        return np.nan, np.nan, np.nan
    low, high = wilson_interval(values.sum(), len(values))
    return float(values.mean()), float(low), float(high)


def summary_table(bugs: pd.DataFrame, problems: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per group of `keys` (method, tags): Find Attr and Find Tag at 10, bug type right (shares of planted bugs, Wilson
    intervals), median rank, P@10, P@25 and recall at 10 (means over problems with a planted bug, bootstrap
    intervals), and the mean number of slices reported on bug-free problems."""
    rows = []
    problems = problems[~problems["failed"].astype(bool)] if "failed" in problems else problems
    for group, mine in problems.groupby(keys, sort=False):
        group = group if isinstance(group, tuple) else (group,)
        row = dict(zip(keys, group))
        if "package" in mine:
            row["package"] = mine["package"].iat[0]
        found = bugs.merge(pd.DataFrame([dict(zip(keys, group))]), on=keys)
        planted = mine[mine["planted"] > 0]
        free = mine[mine["planted"] == 0]
        for name, column in (("Find Attr@10", "find_attr"), ("Find Tag@10", "find_tag"),
                             ("bug type right", "type_right")):
            values = found[column] if column != "type_right" else found.loc[found["find_tag"], column]
            row[name] = _share_interval(values)
        row["median rank"] = float(found["rank"].dropna().median()) if found["rank"].notna().any() else np.nan
        for name in ("P@10", "P@25", "recall"):
            row[name if name != "recall" else "recall@10"] = _mean_interval(planted[name])
        row["bug-free: reported"] = _mean_interval(free["reported"]) if len(free) else (np.nan,) * 3
        row["problems"] = f"{len(planted)} + {len(free)} bug-free"
        rows.append(row)
    return pd.DataFrame(rows)


def by_bug_type(bugs: pd.DataFrame, keys: list[str], by: str = "bug_type") -> pd.DataFrame:
    """Per group of `keys` (tags, method) and planted bug type (or `by="conditions"`: the number of conditions its
    slice has): the bugs planted, Find Tag at 10 and bug type right (shares of those bugs, Wilson intervals)."""
    if by == "conditions":
        bugs = bugs.assign(conditions=bugs["bug"].str.count(" & ") + 1)
    rows = []
    for group, mine in bugs.groupby([*keys, by], sort=by == "conditions"):
        rows.append({**dict(zip([*keys, "planted bug type" if by == "bug_type" else "conditions"], group)),
                     "planted": len(mine),
                     "Find Tag@10": _share_interval(mine["find_tag"]),
                     "bug type right": _share_interval(mine.loc[mine["find_tag"].astype(bool), "type_right"])})
    return pd.DataFrame(rows)


SHARES = ("Find Attr@10", "Find Tag@10", "bug type right", "P@10", "P@25", "recall@10")


def formatted(table: pd.DataFrame) -> pd.DataFrame:
    """summary_table in words: a share as '71% [52, 85]', a count as '3.2 [1.0, 5.4]', '–' where nothing was
    measured."""
    def text(value, share: bool) -> str:
        if not isinstance(value, tuple):
            return "–" if isinstance(value, float) and value != value else str(value)
        mean, low, high = value
        if mean != mean:
            return "–"
        return (f"{100 * mean:.0f}% [{100 * low:.0f}, {100 * high:.0f}]" if share else
                f"{mean:.1f} [{low:.1f}, {high:.1f}]")
    return table.apply(lambda column: column.map(lambda v: text(v, column.name in SHARES)))
