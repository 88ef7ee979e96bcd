"""Tag sources: each measured against the true tags, the best (or a person's choice) in force, never replaced
silently; the precision of a slice's tags; slices that repeat another; the repair verdict; schema diffs."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hibug_core.store import tag_store
from hibug_core.tagging.run import current_tags
from hibug_core.tagging.sources import ADVICE, rank_sources, run_summary, trust_message, untrusted

TRUTH = ["red", "green", "blue"] * 4  # colour_project's imported attr:color, by sample in order
RGB = ("red", "green", "blue")


def save_colours(project, said: list[str], *, attribute: str = "color", tags=RGB, also: dict | None = None) -> int:
    """A finished tagging run that says `said` for every sample (and `also`: more attributes); returns its id."""
    ids = project.samples().index.to_numpy()
    columns = {attribute: tags, **{name: values for name, (values, _) in (also or {}).items()}}
    codes = [[tags.index(t) for t in said]] + [[values.index(t) for t in column] for values, column in
                                              (also or {}).values()]
    index = np.array(codes, dtype=np.int16).T
    ones = np.ones(index.shape, np.float32)
    tag_store.save_run(project, tag_store.TagResult(ids, columns, index, ones, ones), method="zero-shot",
                       encoder="test")
    return int(tag_store.runs(project)["id"].max())


def test_sources_are_measured_and_the_best_is_in_force(colour_project):
    poor = save_colours(colour_project, ["red"] * 12)  # right on 4 of 12
    good = save_colours(colour_project, TRUTH[:9] + ["red", "red", "red"])  # right on 10 of 12
    ranking = rank_sources(colour_project, ["color"])
    table = ranking.table.set_index("source")
    assert ranking.order["color"] == ["imported", f"run:{good}",
                                      f"run:{poor}"]  # the reference first, then by lower bound
    assert table.loc[f"run:{good}", ["checked", "right"]].tolist() == [12, 10]
    assert table.loc[f"run:{good}", "accuracy"] == 10 / 12
    assert table.loc[f"run:{good}", "low"] == pytest.approx(0.5519, abs=1e-4)  # Wilson, 95%
    assert table.loc[f"run:{poor}", "high"] == pytest.approx(0.6094, abs=1e-4)
    assert table.loc["imported", "against"] == "the reference" and table.loc["imported", "in_force"]
    assert current_tags(colour_project).tags["color"].astype(str).tolist() == TRUTH

    # Without the imported tags (the model's own tags only), the better run is in force, not the newest.
    newest = save_colours(colour_project, ["blue"] * 12)
    model = current_tags(colour_project, model_only=True)
    assert model.source["color"] == f"run:{good}" and newest > good


def test_the_run_summary_warns_when_a_run_is_worse_than_what_stays(colour_project):
    good = save_colours(colour_project, TRUTH)
    poor = save_colours(colour_project, ["green"] * 12)
    assert run_summary(colour_project, [good, poor]) == [
        f"color: run #{good} (zero-shot, test) 100.0% right on 12 with known tags or audits; imported tags "
        "(the reference) stays in force",  # as good as the reference: no warning
        f"warning: color: run #{poor} (zero-shot, test) 33.3% right on 12 with known tags or audits, worse "
        "than imported tags (the reference), which stays in force"]


def test_a_person_chooses_a_source_logged_and_auto_gives_it_back(colour_project):
    poor = save_colours(colour_project, ["red"] * 12)
    tag_store.choose_source(colour_project, "color", f"run:{poor}", author="ana")
    assert current_tags(colour_project).tags["color"].astype(str).tolist() == ["red"] * 12
    entry = colour_project.audit_log().iloc[-1]
    assert (entry["action"], entry["actor"], entry["entity"]) == ("choose tag source", "ana", "tags:color")
    ranking = rank_sources(colour_project, ["color"])
    assert ranking.table.query("chosen")["source"].tolist() == [f"run:{poor}"]
    tag_store.choose_source(colour_project, "color", tag_store.AUTO, author="bo")
    assert tag_store.chosen_sources(colour_project) == {}
    assert current_tags(colour_project).tags["color"].astype(str).tolist() == TRUTH
    with pytest.raises(Exception, match="unknown tag source 'best'"):
        tag_store.choose_source(colour_project, "color", "best")


def test_people_audits_measure_the_imported_tags_and_can_dethrone_them(colour_project):
    run = save_colours(colour_project, TRUTH)
    ids = colour_project.samples().index.to_numpy()
    # people say the first three images are blue: the imported red and green of two are wrong, and so are the run's,
    # which agrees with the imported ones; the imported reference is now measured (1 of 3)
    tag_store.correct_tags(colour_project, "color", ids[:3], "blue", author="ana")
    table = rank_sources(colour_project, ["color"]).table.set_index("source")
    assert table.loc["imported", ["checked", "right", "against"]].tolist() == [3, 1, "people's audits"]
    assert table.loc[f"run:{run}", ["checked", "right"]].tolist() == [12, 10]
    assert rank_sources(colour_project, ["color"]).order["color"][0] == f"run:{run}"


def test_poor_tags_are_named_with_what_to_do_including_unchecked_ones_of_a_poor_run(colour_project):
    save_colours(colour_project, ["green", "blue", "red"] * 4, also={"is round": (("yes", "no"), ["yes"] * 12)})
    tag_store.choose_source(colour_project, "color", f"run:{int(tag_store.runs(colour_project)['id'].max())}")
    ranking = rank_sources(colour_project, ["color", "is round"])
    poor = untrusted(ranking)
    assert poor["attribute"].tolist() == ["color", "is round"]
    assert poor["why"].tolist() == ["0% right, run #1 (zero-shot, test)",
                                    "unchecked, from run #1 (zero-shot, test), which is 0% right where it can be "
                                    "checked"]
    message = trust_message(ranking)
    assert message.startswith("These tags are too poor to trust (below 60% right against the known tags and audits): "
                              "color (0% right, run #1 (zero-shot, test)); is round (unchecked")
    assert "teach them by example" in message
    assert trust_message(ranking, attributes=["brightness"]) is None
    from hibug_core.markdown import plain

    shown = trust_message(ranking, text=plain)  # on a page: people's words escaped, the advice's code spans kept
    assert "color (0% right, run #1 \\(zero-shot, test\\))" in shown
    assert "(`open_clip:<arch>:<checkpoint>`)" in shown


def test_slice_tag_precision_on_seeded_tags():
    from hibug_core.slices.tag_precision import slice_tag_precision

    rng = np.random.default_rng(0)
    truth = pd.DataFrame({"color": rng.choice(["red", "blue"], 200), "size": rng.choice(["small", "large"], 200)})
    tags = truth.copy()
    flip = rng.random(200) < 0.3  # 30% of the colours wrong
    tags.loc[flip, "color"] = np.where(tags.loc[flip, "color"] == "red", "blue", "red")
    tags = tags.astype("category")
    truth.loc[:49, "size"] = None  # size known on 150 images only
    frame = slice_tag_precision([(("color", "blue"),), (("color", "blue"), ("size", "small")), (("class", "x"),)],
                                tags.assign(**{"class": pd.Categorical(["x"] * 200)}), truth, skip={"class"})
    inside = tags["color"] == "blue"
    assert frame["tag_checked"].tolist()[0] == int(inside.sum())
    assert frame["tag_right"].iat[0] == int((inside & (truth["color"] == "blue")).sum())
    both = inside & (tags["size"] == "small") & truth["size"].notna()
    assert frame["tag_checked"].iat[1] == int(both.sum())
    assert frame["tag_right"].iat[1] == int((both & (truth["color"] == "blue") & (truth["size"] == "small")).sum())
    assert frame["tag_checked_attributes"].tolist() == ["color", "color, size", ""]
    assert np.isnan(frame["tag_precision"].iat[2])  # only the label: nothing to check
    assert (frame["tag_precision_low"].iloc[:2] < frame["tag_precision"].iloc[:2]).all()


def test_slice_tag_precision_counts_what_masks_count():
    """Counted from categorical codes in one pass per slice: the same numbers as masks of the text values, whatever
    the truth's dtype, order or extra values, and a tag the tags in force never use."""
    from hibug_core.slices.tag_precision import slice_tag_precision

    rng = np.random.default_rng(3)
    n = 3000
    tags = pd.DataFrame({a: pd.Categorical(rng.choice(list("abc"), n)) for a in ("p", "q", "r")}
                        | {"class": pd.Categorical(rng.choice(["car", "dog"], n))}, index=rng.permutation(n) + 100)
    truth = pd.DataFrame({"p": rng.choice(["a", "b", "c", "z", None], n).astype(object),
                          "q": pd.Categorical(rng.choice(["c", "b", "a", None], n)),
                          "known: r": rng.choice(["a", "b", None], n)}, index=tags.index)
    truth = truth.rename(columns={"known: r": "r"}).iloc[rng.permutation(n)]  # another order, reindexed
    tags = tags.rename(columns={"r": "known: r"})
    definitions = [(("p", "a"),), (("p", "b"), ("q", "c")), (("class", "dog"), ("q", "a"), ("known: r", "b")),
                   (("p", "never"),), (("class", "car"),)]
    frame = slice_tag_precision(definitions, tags, truth, skip={"class"})
    aligned = truth.reindex(tags.index)
    for row, definition in zip(frame.itertuples(), definitions):
        inside, checked, right, names = np.ones(n, bool), np.ones(n, bool), np.ones(n, bool), []
        for attribute, tag in definition:
            inside &= (tags[attribute].astype(str) == tag).to_numpy()
            if attribute != "class":
                true = aligned[attribute.removeprefix("known: ")]
                checked &= true.notna().to_numpy()
                right &= (true.astype(object) == tags[attribute].astype(object)).to_numpy()
                names.append(attribute)
        expected = int((inside & checked).sum()) if names else 0
        assert (row.tag_checked, row.tag_right, row.tag_checked_attributes) == (
            expected, int((inside & checked & right).sum()) if names else 0, ", ".join(names))
    assert frame["tag_checked"].iat[0] > 0 and frame["tag_checked"].iat[3] == 0


def test_refinements_and_repeats_follow_the_distinct_slices():
    from hibug_core.slices.redundancy import mark_repeats
    from hibug_core.slices.search import TagMatrix

    frame = pd.DataFrame({"color": ["blue"] * 6 + ["red"] * 6, "dominant": ["b"] * 6 + ["r"] * 6,
                          "size": ["small", "large"] * 6}).astype("category")
    tags = TagMatrix.from_frame(frame)
    errors = np.array([1, 1, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0], dtype=float)
    definitions = [(("color", "blue"), ("size", "small")), (("color", "blue"),), (("dominant", "b"),),
                   (("size", "large"),)]
    slices = pd.DataFrame({"definition": definitions,
                           "description": ["color = blue & size = small", "color = blue", "dominant = b",
                                           "size = large"]})
    marked = mark_repeats(slices, tags, errors, 0.8)
    # the parent's failures are spread (the small blue ones hold half): the parent stands for its refinement;
    # "dominant = b" has the same failures as "color = blue"
    assert marked["description"].tolist() == ["color = blue", "size = large", "color = blue & size = small",
                                              "dominant = b"]
    assert marked["repeats"].tolist() == ["", "", "color = blue", "color = blue"]
    assert mark_repeats(slices, tags, errors, 1.0)["repeats"].tolist() == [""] * 4  # off
    # when one refinement holds (nearly) all of its parent's failures, the bug is that narrower slice
    narrow = np.array([1, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 0], dtype=float)  # the blue failures are all small
    marked = mark_repeats(slices, tags, narrow, 0.8)
    assert marked["description"].tolist()[:2] == ["color = blue & size = small", "size = large"]
    assert marked.set_index("description")["repeats"].to_dict() == {
        "color = blue & size = small": "", "size = large": "", "color = blue": "color = blue & size = small",
        "dominant = b": "color = blue & size = small"}


def test_the_repair_verdict_says_one_seed_is_noise_and_who_won_over_seeds():
    from hibug_core.repair.loop import repair_verdict, repair_won

    def changes(seeds, hibug, random):
        rows = []
        for seed, h, r in zip(seeds, hibug, random):
            for method, after in (("hibug", h), ("random", r), ("no new data", 0.90)):
                rows.append({"method": method, "seed": seed, "slice_id": "overall", "n": 100, "before": 0.88,
                             "after": after})
                rows.append({"method": method, "seed": seed, "slice_id": "s1", "n": 20, "before": 0.5,
                             "after": after - 0.1})
        return pd.DataFrame(rows)

    one = repair_verdict(changes([0], [0.958], [0.962]))
    assert one == ("Held-out accuracy 88.0% before; after, hibug 95.8%, random 96.2%, no new data 90.0%. With one "
                   "seed the difference (-0.4 points) is noise: run 3 or more seeds to tell whether hibug beats "
                   "random.")
    won = repair_verdict(changes([0, 1, 2], [0.96, 0.97, 0.965], [0.94, 0.945, 0.95]))
    assert "On the overall held-out: hibug beat random (+2.0 points, 95% interval +0.8 to +3.2, better on 3 of 3 " \
           "seeds)." in won
    tie = repair_verdict(changes([0, 1, 2], [0.96, 0.94, 0.95], [0.95, 0.95, 0.95]))
    assert "no clear winner between hibug and random" in tie
    assert tie.endswith("Next: to tell them apart, run more seeds (this run had 3) or give a larger budget.")
    lost = repair_verdict(changes([0, 1, 2], [0.93, 0.935, 0.94], [0.96, 0.965, 0.97]))
    assert "random beat hibug" in lost and lost.endswith(
        "Next: try another selection method than hibug, a larger budget, or generated images for the worst slices.")
    assert "Next:" not in won
    # what the Repair page colours its verdict by: won only where it says "hibug beat random", over seeds
    cases = (([0], [0.958], [0.962]), ([0, 1, 2], [0.96, 0.97, 0.965], [0.94, 0.945, 0.95]),
             ([0, 1, 2], [0.96, 0.94, 0.95], [0.95, 0.95, 0.95]), ([0, 1, 2], [0.93, 0.935, 0.94], [0.96, 0.965, 0.97]))
    assert [repair_won(changes(*case)) for case in cases] == [False, True, False, False]


def test_schema_diff_names_added_removed_and_changed_attributes():
    from hibug_core.attributes import Attribute, AttributeSchema
    from hibug_core.attributes.diff import schema_diff

    old = AttributeSchema(attributes=(Attribute(name="color", tags=("red", "blue")),
                                      Attribute(name="size", tags=("small", "large"))))
    new = AttributeSchema(attributes=(Attribute(name="color", tags=("red", "teal"), enabled=False),
                                      Attribute(name="is round", kind="binary", tags=("yes", "no"))))
    assert schema_diff(old, new).values.tolist() == [
        ["color", "changed", "+teal; −blue; enabled: True → False"],
        ["size", "removed", "small, large"],
        ["is round", "added", "yes, no"]]
    assert schema_diff(new, new).empty


def test_map_colours_follow_colour_names():
    from hibug_ui.plots import value_colour

    assert [value_colour(v) for v in ("blue", "red", "Teal", "grey", "dark green", "circle")] == [
        "rgb(0,0,255)", "rgb(255,0,0)", "rgb(0,128,128)", "rgb(128,128,128)", "rgb(0,100,0)", None]


def test_slice_settings_name_the_bad_field():
    from hibug_core.errors import HibugError
    from hibug_core.slices.search import SliceConfig

    with pytest.raises(HibugError, match=r"invalid SliceConfig: max_depth = 7 \(must be a count from 1 to 4\); "
                                         r"min_tag_precision = 1\.5 \(must be in \[0, 1\]\)"):
        SliceConfig(max_depth=7, min_tag_precision=1.5)


def test_a_source_choice_is_undone_from_the_audit_log(colour_project):
    from hibug_core.store.undo import UndoError, undo

    run = save_colours(colour_project, ["red"] * 12)
    tag_store.choose_source(colour_project, "color", f"run:{run}", author="ana")
    entry = int(colour_project.audit_log()["id"].iat[-1])
    assert undo(colour_project, entry, author="bo") == f"'color' back to the tag source 'auto' (entry #{entry} undone)"
    assert tag_store.chosen_sources(colour_project) == {}
    with pytest.raises(UndoError, match="was changed after entry"):
        undo(colour_project, entry)


def test_a_tag_equal_to_the_label_where_present_is_the_label():
    from hibug_core.slices.report import label_attributes

    tags = pd.DataFrame({"shape": ["circle", "square", None], "color": ["red", "red", "blue"]})
    labels = pd.Series(["circle", "square", "square"])  # the third image (generated) has no imported shape
    assert label_attributes(tags, labels) == ["shape"]


def test_a_project_without_attributes_has_no_poor_tags_and_no_warning(colour_project):
    """A project with imported tags only (no schema, as the 100,000-image benchmark's) ranks nothing: the trust
    check says nothing instead of failing on an empty table."""
    ranking = rank_sources(colour_project, [])
    assert ranking.table.empty and untrusted(ranking, attributes=["color"]).empty
    assert trust_message(ranking, attributes=["color"]) is None


def test_a_run_that_is_worse_poor_or_unmeasured_ends_with_a_warning_that_says_what_to_do(colour_project):
    from hibug_core.tagging.sources import run_warning, too_poor

    good = save_colours(colour_project, TRUTH)
    assert run_warning(colour_project, [good]) is None  # as good as the reference: a plain success
    worse = save_colours(colour_project, ["green"] * 12)
    assert run_warning(colour_project, [worse]) == (
        f"1 of the 1 attributes tagged are worse than the tags that stay in force (color). To do better, {ADVICE}.")
    # A run whose tags go into force but are junk, and another attribute nothing can check.
    junk = save_colours(colour_project, ["green", "blue", "red"] * 4, also={"is round": (("yes", "no"), ["yes"] * 12),
                                                                            "is flat": (("yes", "no"), ["no"] * 12)})
    tag_store.choose_source(colour_project, "color", f"run:{junk}")
    warning = run_warning(colour_project, [junk])
    # attributes poor for the same reason are named together, the reason said once
    assert warning == ("3 now in force are too poor to trust: color (0% right, run #3 (zero-shot, test)); is round, "
                       "is flat (unchecked, from run #3 (zero-shot, test), which is 0% right where it can be checked); "
                       "2 of the 3 guessed by a model and now in force cannot be checked (no known tags or audits), "
        "so nothing says they are "
                       f"right: audit a few of each (Tagging → Audit). To do better, {ADVICE}.")
    assert too_poor(rank_sources(colour_project, ["color", "is round"])) == {  # the attributes asked about
        "color": "0% right, run #3 (zero-shot, test)",
        "is round": "unchecked, from run #3 (zero-shot, test), which is 0% right where it can be checked"}
    # Mostly unmeasured (2 of 3 attributes nothing checks), though what can be checked is right.
    unmeasured = save_colours(colour_project, TRUTH, also={"is round": (("yes", "no"), ["yes"] * 12),
                                                           "is big": (("yes", "no"), ["no"] * 12)})
    tag_store.choose_source(colour_project, "color", f"run:{unmeasured}")
    assert run_warning(colour_project, [unmeasured]) == (
        "2 of the 3 guessed by a model and now in force cannot be checked (no known tags or audits), "
        "so nothing says they are right: audit "
        f"a few of each (Tagging → Audit). To do better, {ADVICE}.")


def test_one_row_per_bug_folds_repeats_under_their_slice_and_flags_poor_tags():
    from hibug_core.slices.report import one_row_per_bug, trust_note

    slices = pd.DataFrame({
        "description": ["color = blue", "size = small", "dominant colour = blue", "color = blue & size = large",
                        "texture = patterned"],
        "repeats": ["", "", "color = blue", "color = blue", ""],
        "trusted": [True, True, True, True, False],
        "tag_warning": ["", "", "", "", "texture: 3% right, run #2"],
        "tag_precision": [1.0, 0.9, 1.0, 1.0, 0.5], "tag_checked": [10, 10, 10, 10, 4],
        "tag_precision_high": [1.0, 1.0, 1.0, 1.0, 0.9]})
    bugs = one_row_per_bug(slices)
    assert bugs["description"].tolist() == ["color = blue", "size = small", "texture = patterned"]
    assert bugs["rank"].tolist() == [1, 2, 3]
    assert bugs["members"].tolist() == [["dominant colour = blue", "color = blue & size = large"], [], []]
    assert [trust_note(row) for _, row in bugs.iterrows()] == [
        "", "", "⚠ tags too poor to trust: texture: 3% right, run #2"]
    measured = slices.iloc[4].copy()
    measured["tag_warning"] = ""
    assert trust_note(measured) == "⚠ tags too poor to trust: right on 50% of 4 checked (95% interval up to 90%)"


def test_over_represented_tags_of_a_poor_attribute_are_flagged():
    from hibug_core.slices.selection import over_represented

    tags = pd.DataFrame({"texture": ["patterned"] * 6 + ["plain"] * 6, "color": ["blue"] * 6 + ["red"] * 6})
    selected = np.arange(12) < 6
    found = over_represented(tags, selected, poor={"texture": "3% right, run #2"}).set_index("attribute")
    assert found.loc["texture", "trust"] == "⚠ too poor to trust: 3% right, run #2"
    assert found.loc["color", "trust"] == ""
    assert over_represented(tags, np.zeros(12, bool))["trust"].tolist() == []


def test_a_poor_tag_is_flagged_in_the_image_details_and_a_persons_tag_is_not(colour_project):
    from hibug_core.tagging.sources import too_poor
    from hibug_ui.detail import sample_tags

    junk = save_colours(colour_project, ["green", "blue", "red"] * 4)
    tag_store.choose_source(colour_project, "color", f"run:{junk}")
    first, second = colour_project.samples().index[:2]
    tag_store.correct_tags(colour_project, "color", [int(second)], "green", author="ana")
    poor = too_poor(rank_sources(colour_project, ["color"]))
    shown = sample_tags(colour_project, int(first), poor).set_index("attribute")
    assert shown.at["color", "tag"] == "green"
    assert shown.at["color", "trust"] == f"⚠ too poor to trust: {poor['color']}"
    assert shown.at["known: color", "trust"] == ""
    corrected = sample_tags(colour_project, int(second), poor).set_index("attribute")
    assert corrected.at["color", "source"] == "a person" and corrected.at["color", "trust"] == ""


def test_a_selection_for_a_slice_on_poor_tags_says_so_in_its_name_and_reason():
    from hibug_core.repair.selection import frame

    pool = pd.DataFrame({"image_path": ["a.png", "b.png"], "split": ["pool"] * 2, "confidence": [0.4, 0.9]},
                        index=pd.Index([7, 8]))
    slices = [pd.Series({"slice_id": "s1", "definition": (("color", "blue"), ("texture", "patterned"))}),
              pd.Series({"slice_id": "s2", "definition": (("shape", "triangle"),)})]
    table = frame(pool, np.array([0, 1]), slices, ["hibug2: ranked #1", "hibug2: ranked #2"], 2,
                  poor={"texture": "3% right, run #2"})
    assert table["slice"].tolist() == ["⚠ color = blue & texture = patterned", "shape = triangle"]
    assert table["reason"].tolist() == ["hibug2: ranked #1; ⚠ its tags are too poor to trust (texture: 3% right, "
                                        "run #2)", "hibug2: ranked #2"]


def test_a_run_worse_where_it_can_be_checked_is_not_believed_where_it_cannot(colour_project):
    from hibug_core.tagging.sources import run_warning

    # Worse than the imported colours (so not in force), and alone on an attribute nothing can check.
    run = save_colours(colour_project, ["green", "blue", "red"] * 4, also={"is shiny": (("yes", "no"), ["yes"] * 12)})
    assert run_warning(colour_project, [run]) == (
        "1 of the 2 attributes tagged are worse than the tags that stay in force (color); 1 now in force are too "
        f"poor to trust: is shiny (unchecked, from run #{run} (zero-shot, test), which is 0% right where it can be "
        f"checked); 1 of the 1 guessed by a model and now in force cannot be checked (no known tags or audits), "
        "so nothing says they are "
        f"right: audit a few of each (Tagging → Audit). To do better, {ADVICE}.")


def test_text_keeping_hibugs_code_spans_escapes_everything_else():
    from hibug_core.markdown import plain

    said = "is round (run #2): [x](http://e) then `open_clip:<arch>` and *a*"
    assert plain(said, keep_code=True) == ("is round \\(run #2\\)\\: \\[x\\]\\(http\\://e\\) then "
                                           "`open_clip:<arch>` and \\*a\\*")
    assert plain("no code (x)", keep_code=True) == plain("no code (x)") == "no code \\(x\\)"


def test_pickers_flag_the_attributes_and_tags_too_poor_to_trust():
    from hibug_ui.state import flagged_attribute, flagged_tag

    poor = {"texture": "3% right, run #2"}
    assert flagged_attribute(poor, "texture") == "⚠ texture (tags too poor to trust)"
    assert flagged_attribute(poor, "color") == "color"
    assert flagged_tag(poor, "texture = patterned") == "⚠ texture = patterned (tags too poor to trust)"
    assert [flagged_tag(poor, o) for o in ("color = blue", "any tag", "texture")] == ["color = blue", "any tag",
                                                                                      "texture"]
