"""Tag sources per attribute (imported tags, each tagging run), measured against ground truth, and the one in force."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from hibug_core.attributes.schema import MEASURED
from hibug_core.stats import wilson_interval
from hibug_core.store import tag_store
from hibug_core.store.tag_store import AUTO, IMPORTED, run_id_of, run_key

# Below this measured accuracy (upper end of its 95% interval), the tags of an attribute are called too poor to trust.
TRUST_FLOOR = 0.6
IN_FORCE, WORSE = "in force", "worse"  # an attribute's outcome of a run: its tags now in force, or worse than those
ADVICE = ("tag them with a CLIP model (`open_clip:<arch>:<checkpoint>`), teach them by example (Tagging → Teach by "
          "example), or audit them (Tagging → Audit)")


def ground_truth(project, *, people_only: bool = False) -> pd.DataFrame:
    """True tags: imported attr: columns, overridden by the tags people set or confirmed (examples given to teach a
    probe are left out, so a probe is never graded on its own training data). people_only: people's tags alone."""
    truth = pd.DataFrame() if people_only else project.known_tags()
    people = tag_store.corrections(project)
    people = people[people["kind"] != "example"]
    if not people.empty:
        confirmed = people.pivot(index="sample_id", columns="attribute", values="tag")
        truth = confirmed.combine_first(truth) if not truth.empty else confirmed
    return truth


@dataclass(frozen=True)
class SourceRanking:
    """Every tag source of every attribute with its measured accuracy, and the order they are used in."""

    table: pd.DataFrame  # attribute, source, label, tagged, checked, accuracy, low, high, against, chosen, in_force
    order: dict[str, list[str]]  # attribute -> source keys, the one in force first

    def in_force(self, attribute: str) -> str | None:
        keys = self.order.get(attribute, [])
        return keys[0] if keys else None

    def row(self, attribute: str, source: str) -> pd.Series:
        rows = self.table[(self.table["attribute"] == attribute) & (self.table["source"] == source)]
        return rows.iloc[0]


def source_label(source: str, runs: pd.DataFrame) -> str:
    """How a person reads a source: "imported tags" or "run #3 (zero-shot, conse)"."""
    if source == IMPORTED:
        return "imported tags"
    run_id = run_id_of(source)
    row = runs[runs["id"] == run_id]
    if row.empty:
        return f"run #{run_id}"
    method, encoder = row["method"].iat[0], row["encoder"].iat[0]
    return f"run #{run_id} ({method}{', ' + str(encoder) if isinstance(encoder, str) and encoder else ''})"


def _finished_runs(project) -> pd.DataFrame:
    runs = tag_store.runs(project)
    return runs[runs["status"] == "finished"].sort_values("id", ascending=False) if not runs.empty else runs


def _candidates(project, attributes: list[str], runs: pd.DataFrame, model_only: bool) -> dict[str, list[str]]:
    import json

    found = {a: [] for a in attributes}
    known = project.known_tags()
    for attribute in attributes if not model_only else ():
        if attribute in known.columns and known[attribute].notna().any():
            found[attribute].append(IMPORTED)
    for run_id, raw in zip(runs["id"], runs["attributes_json"]):  # newest first
        for attribute in json.loads(raw):
            if attribute in found:
                found[attribute].append(run_key(run_id))
    return found


def rank_sources(project, attributes: list[str], *, sample_ids=None, model_only: bool = False,
                 chosen: dict[str, str] | None = None) -> SourceRanking:
    """Measure every source of `attributes` and order them: a person's choice first, then by the lower end of the
    95% interval of accuracy; imported tags are the reference (measured only against people's audits), sources
    that nothing measures come after the measured ones, newest first. model_only leaves imported tags out."""
    runs = _finished_runs(project)
    index = project.samples().index if sample_ids is None else pd.Index(np.asarray(sample_ids))
    truth, people = ground_truth(project), ground_truth(project, people_only=True)
    chosen = tag_store.chosen_sources(project) if chosen is None else chosen
    cache: dict = {}
    rows, order, labels = [], {}, {}
    for attribute, keys in _candidates(project, attributes, runs, model_only).items():
        measured = []
        for recency, key in enumerate(keys):
            tags = tag_store.source_tags(project, key, attribute, index, cache)
            reference = people if key == IMPORTED else truth
            true = reference[attribute].reindex(index) if attribute in reference.columns else \
                pd.Series(np.nan, index=index)
            tagged = tags.notna().to_numpy()
            both = tagged & true.notna().to_numpy()
            checked = int(both.sum())
            # only the checked rows as objects (a categorical of ten million rows as objects: a third of a second)
            correct = int((tags[both].to_numpy(object) == true[both].to_numpy(object)).sum()) if checked else 0
            low, high = wilson_interval(np.array([correct]), np.array([max(checked, 1)]))
            accuracy = correct / checked if checked else np.nan
            if checked:
                rank, against = float(low[0]), "people's audits" if key == IMPORTED else "known tags and audits"
            elif key == IMPORTED:
                rank, against = 1.0, "the reference"
            else:
                rank, against = -1.0 - recency * 1e-6, "nothing to measure against"
            if key not in labels:
                labels[key] = source_label(key, runs)
            rows.append({"attribute": attribute, "source": key, "label": labels[key],
                         "tagged": int(tagged.sum()), "checked": checked, "accuracy": accuracy,
                         "low": float(low[0]) if checked else np.nan, "high": float(high[0]) if checked else np.nan,
                         "against": against, "right": correct})
            measured.append((rank, -recency, key))
        ranked = [key for _, _, key in sorted(measured, reverse=True)]
        pick = chosen.get(attribute)
        if pick in ranked:
            ranked.remove(pick)
            ranked.insert(0, pick)
        order[attribute] = ranked
    table = pd.DataFrame(rows, columns=["attribute", "source", "label", "tagged", "checked", "accuracy", "low", "high",
                                        "against", "right"])
    # A run's accuracy over every attribute it tagged that can be checked: what its unchecked attributes are judged by.
    pooled = table[table["source"] != IMPORTED].groupby("source")[["right", "checked"]].sum()
    pooled = pooled[pooled["checked"] > 0]
    _, run_high = wilson_interval(pooled["right"].to_numpy(), pooled["checked"].to_numpy())
    table["run_accuracy"] = table["source"].map(pooled["right"] / pooled["checked"])
    table["run_high"] = table["source"].map(pd.Series(run_high, index=pooled.index))
    table["chosen"] = [chosen.get(a) == s for a, s in zip(table["attribute"], table["source"])]
    table["in_force"] = [order[a][0] == s for a, s in zip(table["attribute"], table["source"])]
    return SourceRanking(table, order)


def source_order(project, attributes: list[str], *, model_only: bool = False) -> dict[str, list[str]]:
    """rank_sources(...).order, measuring only the attributes with more than one source to choose from."""
    runs = _finished_runs(project)
    order = _candidates(project, attributes, runs, model_only)
    chosen = tag_store.chosen_sources(project)
    contested = [a for a, keys in order.items() if len(keys) > 1 and chosen.get(a) not in keys]
    for attribute, keys in order.items():
        if chosen.get(attribute) in keys:
            keys.remove(chosen[attribute])
            keys.insert(0, chosen[attribute])
    if contested:
        order.update(rank_sources(project, contested, model_only=model_only, chosen=chosen).order)
    return order


def untrusted(ranking: SourceRanking, floor: float = TRUST_FLOOR, attributes=None) -> pd.DataFrame:
    """The attributes (of `attributes`, default all) whose tags in force are too poor to trust, with a `why`: their
    accuracy's upper 95% end is below `floor`, or, where nothing checks them, that of the run that made them over the
    attributes it tagged that can be checked (a tagger that gets the checkable ones wrong is not believed on the
    others)."""
    table = ranking.table[ranking.table["in_force"].astype(bool)]  # an empty column is object-typed: not a mask
    if attributes is not None:
        table = table[table["attribute"].isin(list(attributes))]
    measured = table["checked"].gt(0) & table["high"].lt(floor)
    by_run = table["checked"].eq(0) & table["run_high"].lt(floor)
    poor = table[measured | by_run].copy()
    poor["why"] = [f"{acc:.0%} right, {label}" if checked else
                   f"unchecked, from {label}, which is {run:.0%} right where it can be checked"
                   for acc, label, checked, run in zip(poor["accuracy"], poor["label"], poor["checked"],
                                                      poor["run_accuracy"])]
    return poor


def too_poor(ranking: SourceRanking, floor: float = TRUST_FLOOR, attributes=None) -> dict[str, str]:
    """{attribute: why} of the attributes whose tags in force are too poor to trust (untrusted): what every view that
    shows or uses a tag flags it by."""
    poor = untrusted(ranking, floor, attributes)
    return dict(zip(poor["attribute"], poor["why"]))


def poor_flag(why: str) -> str:
    """How a tag of an attribute too poor to trust is flagged where it is shown (details, the map's tags)."""
    return f"⚠ too poor to trust: {why}"


def trust_message(ranking: SourceRanking, floor: float = TRUST_FLOOR, attributes=None, *,
                  text=str) -> str | None:
    """A sentence when some tags in force (of `attributes`, default all) are too poor to trust, with what to do; None
    when all are fine. text: how people's words (attribute names, reasons) are written (markdown.plain on a page, so
    they stay text while the advice keeps its code spans)."""
    poor = untrusted(ranking, floor, attributes)
    if poor.empty:
        return None
    grouped = poor.groupby("why", sort=False)["attribute"].agg(", ".join)
    listed = "; ".join(f"{text(attributes)} ({text(why)})" for why, attributes in grouped.items())
    return (f"These tags are too poor to trust (below {floor:.0%} right against the known tags and audits): {listed}. "
            f"Slices that use them are flagged and ranked down. To do better, {ADVICE}.")


def run_outcomes(project, run_ids: list[int], floor: float = TRUST_FLOOR) -> pd.DataFrame:
    """Per attribute a run tagged: attribute, run, the run's method and label, accuracy and checked (against the
    ground truth), outcome ("in force", "worse": a better source stays in force, "stays": another stays for another
    reason), the source that stays in force with why, and `poor`: why its tags now in force are too poor to trust
    ("" when they are not, or are not in force; an attribute nothing checks is judged by the run's checkable ones)."""
    rows = []
    runs = tag_store.runs(project)
    for run_id in run_ids:
        attributes = list(tag_store.run_attributes(project, run_id))
        ranking = rank_sources(project, attributes)
        poor = too_poor(ranking, floor, attributes)
        key = run_key(run_id)
        method = runs.loc[runs["id"] == run_id, "method"]
        for attribute in attributes:
            mine, force = ranking.row(attribute, key), ranking.in_force(attribute)
            row = {"attribute": attribute, "run": run_id, "method": method.iat[0] if len(method) else None,
                   "label": source_label(key, runs), "accuracy": mine["accuracy"], "checked": int(mine["checked"]),
                   "outcome": IN_FORCE, "other": None, "why": None, "poor": poor.get(attribute, "")}
            if force != key:
                other = ranking.row(attribute, force)
                worse = mine["accuracy"] < 1 if other["source"] == IMPORTED and not other["checked"] else \
                    mine["low"] < other["low"] if other["checked"] else False
                row.update(outcome=WORSE if mine["checked"] and not other["chosen"] and worse else "stays",
                           other=other["label"], why="chosen by a person" if other["chosen"] else (
                               f"{other['accuracy']:.1%} right" if other["checked"] else other["against"]), poor="")
            rows.append(row)
    return pd.DataFrame(rows, columns=["attribute", "run", "method", "label", "accuracy", "checked", "outcome", "other",
                                       "why", "poor"])


def run_warning(project, run_ids: list[int], floor: float = TRUST_FLOOR, *,
                outcomes: pd.DataFrame | None = None) -> str | None:
    """Why finished tagging runs are not a plain success, with what to do: some of their tags are worse than those
    that stay in force, some now in force are too poor to trust, or most now in force cannot be checked. None when
    none is so. outcomes: run_outcomes of these runs, when already at hand."""
    outcomes = run_outcomes(project, run_ids, floor) if outcomes is None else outcomes
    if outcomes.empty:
        return None
    parts = []
    worse = outcomes[outcomes["outcome"] == WORSE]
    if len(worse):
        parts.append(f"{len(worse)} of the {len(outcomes)} attributes tagged are worse than the tags that stay in "
                     f"force ({', '.join(worse['attribute'])})")
    in_force = outcomes[outcomes["outcome"] == IN_FORCE]
    poor = in_force[in_force["poor"] != ""]
    if len(poor):
        grouped = poor.groupby("poor", sort=False)["attribute"].agg(", ".join)  # one reason, said once
        parts.append(f"{len(poor)} now in force are too poor to trust: "
                     + "; ".join(f"{attributes} ({why})" for why, attributes in grouped.items()))
    # tags computed exactly from the pixels (a "measured" run) need no checking; the others are a model's guesses
    guessed = in_force[in_force["method"] != MEASURED]
    unmeasured = guessed[guessed["checked"] == 0]
    if len(unmeasured) * 2 > len(guessed):
        parts.append(f"{len(unmeasured)} of the {len(guessed)} guessed by a model and now in force cannot be checked "
                     "(no known tags or audits), so nothing says they are right: audit a few of each (Tagging → Audit)")
    return "; ".join(parts) + f". To do better, {ADVICE}." if parts else None


def run_verdict(project, run_ids: list[int], floor: float = TRUST_FLOOR, *,
                outcomes: pd.DataFrame | None = None) -> str | None:
    """run_warning in one sentence with the next step (run_warning is the details); None when the runs are a plain
    success."""
    outcomes = run_outcomes(project, run_ids, floor) if outcomes is None else outcomes
    if outcomes.empty:
        return None
    in_force = outcomes[outcomes["outcome"] == IN_FORCE]
    guessed = in_force[in_force["method"] != MEASURED]
    unmeasured = guessed[guessed["checked"] == 0]
    doubtful = set(outcomes.loc[outcomes["outcome"] == WORSE, "attribute"]) | set(
        in_force.loc[in_force["poor"] != "", "attribute"])
    if len(unmeasured) * 2 > len(guessed):
        doubtful |= set(unmeasured["attribute"])
    if not doubtful:
        return None
    poor = doubtful - set(unmeasured["attribute"])
    step = (f"tag {'it' if len(doubtful) == 1 else 'them'} with a CLIP model (Encoder: other…, e.g. "
            "`open_clip:<arch>:<checkpoint>`) or teach by example (Tagging → Teach by example)" if poor
            else "audit a few of each (Tagging → Audit), so their tags can be measured")
    return f"{len(doubtful)} of the {len(outcomes)} attributes tagged cannot be trusted yet. Next: {step}."


def _measured(row) -> str:
    if row.checked:
        return f"{row.accuracy:.1%} right on {row.checked:,} with known tags or audits"
    return "computed from the pixels" if row.method == MEASURED else "not checked (no known tags or audits)"


def run_summary(project, run_ids: list[int], *, outcomes: pd.DataFrame | None = None) -> list[str]:
    """One sentence per attribute a run tagged: its accuracy against the ground truth, and whether it is now in force
    or worse than what stays in force (a warning). outcomes: run_outcomes of these runs, when already at hand."""
    outcomes = run_outcomes(project, run_ids) if outcomes is None else outcomes
    lines = []
    for row in outcomes.itertuples():
        if row.outcome == IN_FORCE:
            lines.append(f"{row.attribute}: {row.label} {_measured(row)}; now in force")
        elif row.outcome == WORSE:
            lines.append(f"warning: {row.attribute}: {row.label} {_measured(row)}, worse than {row.other} "
                         f"({row.why}), which stays in force")
        else:
            lines.append(f"{row.attribute}: {row.label} {_measured(row)}; {row.other} ({row.why}) stays in force")
    return lines


def run_digest(project, run_ids: list[int], *, outcomes: pd.DataFrame | None = None) -> str:
    """run_summary in a few sentences for a person: warnings first, then what is in force, grouped. outcomes:
    run_outcomes of these runs, when already at hand."""
    outcomes = run_outcomes(project, run_ids) if outcomes is None else outcomes
    parts = []
    worse = outcomes[outcomes["outcome"] == WORSE]
    if len(worse):
        parts.append("Worse than what stays in force, so not used: " + "; ".join(
            f"{r.attribute} ({r.label}, {r.accuracy:.1%} right; {r.other} stays)" for r in worse.itertuples()) + ".")
    measured = outcomes[(outcomes["outcome"] == IN_FORCE) & (outcomes["checked"] > 0)]
    if len(measured):
        parts.append("Now in force, measured: " + "; ".join(
            f"{r.attribute} ({r.accuracy:.1%} right)" for r in measured.itertuples()) + ".")
    unchecked = outcomes[(outcomes["outcome"] == IN_FORCE) & (outcomes["checked"] == 0)]
    computed = unchecked["method"] == MEASURED
    if computed.any():
        parts.append("Now in force, computed from the pixels (exact, nothing to check): " +
                     ", ".join(unchecked.loc[computed, "attribute"]) + ".")
    if (~computed).any():
        parts.append("Now in force, guessed by a model and not checked (no known tags or audits): " +
                     ", ".join(unchecked.loc[~computed, "attribute"]) + ".")
    stays = outcomes[outcomes["outcome"] == "stays"]
    if len(stays):
        parts.append("Kept aside: " + "; ".join(f"{r.attribute} ({r.other}: {r.why})" for r in stays.itertuples())
                     + ".")
    return " ".join(parts)


__all__ = ["ADVICE", "AUTO", "IMPORTED", "SourceRanking", "TRUST_FLOOR", "ground_truth", "rank_sources", "run_digest",
           "poor_flag", "run_outcomes", "run_summary", "run_warning", "too_poor",
           "run_verdict", "source_label", "trust_message", "untrusted"]
