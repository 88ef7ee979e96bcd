"""HiBug's own measures on the classification benchmark's paper tables (its Table 1's Find Attr. and Find Des. in any
reported slice, its §4.1 "name or a sub-case"; the paper's arm, beside the one scoring of every finder in
hibug_core.bench.ranking), and the slice searches the benchmarks compare: HiBug2's as a user gets it and HiBug's
rule."""
from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd

from hibug_core.bench.problems import OF_A_CLASS, RARE, SPURIOUS, PlantedProblem
from hibug_core.demo.easyvqa import SHAPES
from hibug_core.slices.search import CLASS, SliceConfig

HIBUG2_SEARCH, HIBUG_SEARCH = "hibug2", "hibug"  # the rows' searches: HiBug2's rule (hibug's default), HiBug's own


def hibug_search(config: SliceConfig) -> SliceConfig:
    """HiBug's rule with `config`'s depth, support and C: every slice below the overall score by C, ranked by how far
    below, with no significance test, no parent filter (HiBug2 added the "worse than each parent" step) and no folding
    (the minimum support kept: without it one-image slices rank first)."""
    return replace(config, rank_by="gap", alpha=1.0, parent_alpha=1.0, parents=False, max_overlap=1.0)


# The slice searches the benchmarks compare (HiBug2's Table 2 sets HiBug's beside HiBug2's): "hibug2", the search as a
# user gets it (ranked by the confident gap, a child kept only when worse than each parent, repeats of one bug
# folded); "hibug", HiBug's rule.
SEARCHES = {"hibug2": SliceConfig(), "hibug": hibug_search(SliceConfig())}


def _normal(name: str) -> str:
    return name.lower().replace("colour", "color").strip()


def attribute_matches(name: str, tags, truth_name: str, truth_tags) -> bool:
    """Whether a reported attribute stands for a true one: the same name, or at least half of the true tags
    (so "dominant colour" stands for color and a library "position" with left/center/right for horizontal position)."""
    if _normal(name) == _normal(truth_name):
        return True
    truth = {_normal(t) for t in truth_tags}
    return len(truth & {_normal(t) for t in tags}) >= len(truth) / 2


@dataclass(frozen=True)
class Hit:
    """How one reported slice relates to the planted bug."""

    has_attribute: bool
    has_tag: bool
    right_type: bool


def judge(definition, bug_type: str, top_label, problem: PlantedProblem, vocabulary: dict[str, list[str]],
          truth_tags: list[str]) -> Hit:
    """Attribute: the slice uses an attribute standing for the planted one (any tag). Tag: it also uses the planted
    tag, and for a rare case the slice is about the planted class (a class or shape condition, or its main label)."""
    attribute_hit = tag_hit = False
    about_label = top_label == problem.label
    for attribute, tag in definition:
        tags = vocabulary.get(attribute, [])
        if attribute == CLASS or attribute_matches(attribute, tags, "shape", SHAPES):
            about_label |= _normal(tag) == problem.label
        if attribute_matches(attribute, tags, problem.attribute, truth_tags):
            attribute_hit = True
            tag_hit |= _normal(tag) == _normal(problem.tag)
    if problem.bug_type in OF_A_CLASS:
        tag_hit &= about_label
    return Hit(attribute_hit, tag_hit, bug_type == problem.bug_type)


SUB_CASE = 0.9  # a slice is a sub-case of the rare case when at least this share of its samples are of the case


def score_report(slices: pd.DataFrame, vocabulary: dict[str, list[str]], problem: PlantedProblem,
                 truth_tags: list[str], top_n: int = 10, case_share=None) -> dict:
    """Find Attr / Find Tag (hibug's stricter measures: in a top-`top_n` error slice of the right bug type), whether
    the first top slice with the planted tag has the right bug type, and the rank of the first slice that finds the
    tag with the right type; and HiBug's own Find Attr. / Find Des. (its Table 1): in any reported slice, whatever its
    bug type (the paper also counts WordNet synonyms of the tag; the planted tags here are the vocabulary's own
    words, so an exact match is what a synonym would add to). For a rare case, HiBug's "name or a sub-case" (its
    §4.1): a reported slice that names it, or one whose samples are (at least SUB_CASE of them) the case's own,
    whatever tags name it; `case_share(definition)` gives that share. On a correlation problem, Table 1 the paper's
    way: Find Attr. and Find Des. among the correlations reported (slices typed as spurious correlations), where the
    paper counts what HiBug "finds that the model's prediction is correlated with"."""
    hits = [judge(row.definition, row.bug_type, row.top_label, problem, vocabulary, truth_tags)
            for row in slices.itertuples()]
    top = hits[:top_n]
    with_tag = [h for h in top if h.has_tag]
    first = next((rank for rank, h in enumerate(hits, 1) if h.has_tag and h.right_type), None)
    return {"find_attr": any(h.has_attribute and h.right_type for h in top),
            "find_tag": any(h.has_tag and h.right_type for h in top),
            "tag_in_top": bool(with_tag),
            "type_right": with_tag[0].right_type if with_tag else None,
            "first_rank": first,
            "paper_find_attr": any(h.has_attribute for h in hits),
            "paper_find_des": any(h.has_tag for h in hits),
            # HiBug's Table 1 the paper's way: among the correlations it reports (slices it types as spurious
            # correlations), one with the feature's attribute / the feature itself; correlation problems only
            **({"correlation_find_attr": any(h.has_attribute and h.right_type for h in hits),
                "correlation_find_des": any(h.has_tag and h.right_type for h in hits)}
               if problem.bug_type == SPURIOUS else {}),
            "paper_name_or_sub_case": (None if problem.bug_type != RARE or case_share is None else
                                       any(h.has_tag or case_share(d) >= SUB_CASE
                                           for h, d in zip(hits, slices["definition"]))),
            "n_slices": len(hits)}
