"""Models compared slice by slice (hibug_core.slices.compare), `hibug compare` and the CI gate `hibug check`: exact
figures on seeded manifests."""
from __future__ import annotations

from xml.etree import ElementTree

import numpy as np
import pytest
from scipy.stats import binomtest, ttest_rel

from hibug_core.cli import main
from hibug_core.slices.compare import (
    IMPROVEMENT,
    MCNEMAR,
    PAIRED_T,
    REGRESSION,
    UNCHANGED,
    CompareConfig,
    compare_models,
    pair_matrix,
)
from hibug_core.slices.search import SliceConfig
from hibug_core.store.project import Project

from compare_support import manifest_project, planted_pair


@pytest.fixture
def two_models(tmp_path):
    """40 cats: `model` wrong on 11 (6 red, 5 blue), `other` wrong on the 10 even red ones."""
    rows = []
    for i in range(40):
        color = "red" if i < 20 else "blue"
        first = "dog" if i % 4 == 0 or i == 2 else "cat"
        other = "dog" if (i < 20 and i % 2 == 0) or i == 0 else "cat"
        rows.append(f"s{i},x.png,cat,{first},{other},val,{color}")
    with manifest_project(tmp_path, "id,image,label,prediction,pred:other,split,attr:color", rows) as project:
        yield project


def test_two_models_compared_slice_by_slice_with_exact_mcnemar(two_models):
    result = compare_models(two_models, ["model", "other"], slices=SliceConfig(max_depth=1, min_support=5),
                            config=CompareConfig(worst_share=0.5))
    assert result.test == MCNEMAR
    table = result.against("other").set_index("description")
    red, blue = table.loc["color = red"], table.loc["color = blue"]
    assert (red["baseline_score"], red["candidate_score"]) == (0.7, 0.5)
    assert (blue["baseline_score"], blue["candidate_score"]) == (0.75, 1.0)
    # red: 4 samples only the baseline gets right (6, 10, 14, 18), none only the candidate; blue: 0 and 5
    assert (red["baseline_only"], red["candidate_only"], blue["baseline_only"], blue["candidate_only"]) == (4, 0, 0, 5)
    assert red["p_value"] == binomtest(0, 4).pvalue == 0.125
    assert blue["p_value"] == binomtest(0, 5).pvalue == 0.0625
    # Benjamini-Hochberg over the two slices compared ("class = cat" is every sample: not a slice)
    assert len(table) == 2
    assert red["q_value"] == blue["q_value"] == pytest.approx(0.125)
    assert set(table["change"]) == {UNCHANGED}
    overall = result.overall.set_index("model")
    assert overall.loc["model", "score"] == 0.725 and overall.loc["other", "score"] == 0.75
    assert overall.loc["other", "difference"] == pytest.approx(0.025)
    assert overall.loc["other", "p_value"] == binomtest(4, 9).pvalue == 1.0  # 4 lost against 5 gained
    # HiBug2's error slices per model at C = 0.2: only `other`'s red (0.5) is under its 0.75 - 0.2; at C = 0.02 the
    # baseline's red (0.7, under 0.705) counts too
    assert list(result.overall["error_slices"]) == [0, 1]
    closer = compare_models(two_models, ["model", "other"], slices=SliceConfig(max_depth=1, min_support=5),
                            config=CompareConfig(error_gap=0.02))
    assert list(closer.overall["error_slices"]) == [1, 1]
    with pytest.raises(Exception, match="error_gap"):
        CompareConfig(error_gap=1.5)
    iou = result.failure_iou.iloc[0]
    # model fails on 0,2,4,8,...,36 (11); other on 0,2,...,18 (10); both on 0,2,4,8,12,16 (6)
    assert (iou["failures_a"], iou["failures_b"], iou["both"]) == (11, 10, 6)
    assert iou["iou"] == pytest.approx(6 / 15)
    assert result.worst_overlap.iloc[0]["jaccard"] == 1.0  # both are worst on red
    matrix = pair_matrix(result.failure_iou, result.models, "iou")
    assert matrix.loc["other", "model"] == matrix.loc["model", "other"] == pytest.approx(0.4)
    disagree = result.disagreements("color = blue", "model", "other")
    assert list(disagree.index.map(lambda i: two_models.samples().at[i, "sample_key"])) == \
        ["s20", "s24", "s28", "s32", "s36"]
    assert set(disagree["right"]) == {"other"}
    disagree.loc[:, "right"] = "changed by a page"  # kept for the next call, which gets it as it was made
    assert set(result.disagreements("color = blue", "model", "other")["right"]) == {"other"}
    assert len(result.disagreements(None, "model", "other")) == 9  # 4 lost and 5 gained, over every shared sample


def test_check_fails_on_a_planted_slice_regression_and_names_it(tmp_path, capsys):
    planted_pair(tmp_path)
    junit, summary = tmp_path / "gate.xml", tmp_path / "gate.md"
    code = main(["check", str(tmp_path / "p"), "--baseline", "base", "--candidate", "cand", "--junit", str(junit),
                 "--markdown", str(summary)])
    out = capsys.readouterr().out
    assert code == 1
    assert "FAILED: 3 significant drop(s) over" in out and "color = green" in out  # one per problem, not per slice
    with Project.open(tmp_path / "p", read_only=True) as project:
        checked = compare_models(project, ["base", "cand"], slices=SliceConfig(max_depth=2, min_support=30)).checked()
    failed = checked[checked["failed"]]
    green = failed.set_index("description").loc["color = green"]
    assert green["baseline_score"] - green["candidate_score"] == pytest.approx(0.4)
    assert green["repeats"] == "" and green["kind"] == "slice"
    # every other failing slice is a repeat of the green one, the overall drop included in its own row
    assert set(failed.loc[failed["kind"] == "slice", "repeats"]) <= {"", "color = green"}
    assert set(failed.loc[failed["repeats"] == "", "description"]) == {"overall", "class = cat", "color = green"}
    suite = ElementTree.parse(junit).getroot().find("testsuite")
    cases = suite.findall("testcase")
    assert int(suite.get("tests")) == len(cases) == len(checked)
    assert int(suite.get("failures")) == len(failed) == sum(c.find("failure") is not None for c in cases)
    green_case = next(c for c in cases if c.get("name") == "color = green")
    assert green_case.get("classname") == "hibug.slice"
    assert green_case.find("failure").get("message").startswith(
        "significant regression: 100 samples: 90.0% -> 50.0% (-40.0 pts), p = ")
    red_case = next(c for c in cases if c.get("name") == "color = red")
    assert red_case.find("failure") is None and "+0.0 pts" in red_case.find("system-out").text
    text = summary.read_text()
    assert "Gate **failed**: 3 significant regression(s)" in text and "color = green" in text


def test_check_passes_on_identical_columns(tmp_path, capsys):
    planted_pair(tmp_path, same=True)
    junit = tmp_path / "gate.xml"
    assert main(["check", str(tmp_path / "p"), "--baseline", "base", "--candidate", "cand", "--junit",
                 str(junit)]) == 0
    assert "passed" in capsys.readouterr().out
    suite = ElementTree.parse(junit).getroot().find("testsuite")
    assert suite.get("failures") == "0" and len(suite.findall("testcase")) > 1
    assert not suite.findall(".//failure")


@pytest.mark.parametrize("args, message", [
    (["--baseline", "base", "--candidate", "nope"], "no model 'nope' in this project; known: base, cand"),
    (["--baseline", "base", "--candidate", "base"], "baseline and candidate are both 'base'"),
    (["--baseline", "base", "--candidate", "cand", "--split", "test"], "no labelled 'test' samples"),
    (["--baseline", "base", "--candidate", "cand", "--max-drop", "2"], "max_drop = 2.0"),
])
def test_check_refuses_bad_input_with_status_2(tmp_path, capsys, args, message):
    planted_pair(tmp_path, same=True)
    assert main(["check", str(tmp_path / "p"), *args]) == 2
    assert message in capsys.readouterr().err


def test_scores_that_are_not_right_or_wrong_get_a_paired_t_test(tmp_path):
    rng = np.random.default_rng(3)
    base = rng.uniform(0.3, 1.0, 200)
    cand = np.clip(base + rng.normal(0.0, 0.05, 200) - np.where(np.arange(200) < 100, 0.1, 0.0), 0, 1)
    rows = [f"s{i},x.png,person,person,person,val,{'lying' if i < 100 else 'standing'},{base[i]:.6f},{cand[i]:.6f}"
            for i in range(200)]
    with manifest_project(tmp_path, "id,image,label,pred:base,pred:cand,split,attr:pose,score:base,score:cand",
                  rows) as project:
        result = compare_models(project, ["base", "cand"], slices=SliceConfig(max_depth=1, min_support=10))
    assert result.test == PAIRED_T
    table = result.against().set_index("description")
    base6, cand6 = np.round(base, 6), np.round(cand, 6)
    for name, rows_of in (("pose = lying", slice(0, 100)), ("pose = standing", slice(100, 200))):
        expected = ttest_rel(cand6[rows_of], base6[rows_of]).pvalue
        assert table.loc[name, "p_value"] == pytest.approx(expected, rel=1e-9)
        assert table.loc[name, "difference"] == pytest.approx((cand6[rows_of] - base6[rows_of]).mean(), abs=1e-12)
    assert table.loc["pose = lying", "change"] == REGRESSION
    assert table.loc["pose = standing", "change"] == UNCHANGED
    assert "baseline_only" not in table.columns


def test_compare_command_prints_and_writes_every_format(tmp_path, capsys):
    planted_pair(tmp_path)
    project = str(tmp_path / "p")
    assert main(["compare", project, "--models", "base,cand", "--output", str(tmp_path / "c.html")]) == 0
    out = capsys.readouterr().out
    assert "cand against base: " in out and "regression   color = green" in out
    assert "; 2 error slices at C = 0.2" in out  # green and green & small (HiBug2's count)
    page = (tmp_path / "c.html").read_text()
    assert "<tr class=\"regression\"><td>cand</td><td>color = green</td>" in page
    assert main(["compare", project, "--models", "base,cand", "--output", str(tmp_path / "c.csv")]) == 0
    import pandas as pd

    table = pd.read_csv(tmp_path / "c.csv")
    assert table.loc[table["description"] == "color = green", "change"].tolist() == [REGRESSION]
    assert main(["compare", project, "--models", "base,cand", "--output", str(tmp_path / "c.md")]) == 0
    markdown = (tmp_path / "c.md").read_text()
    green = table[table["description"] == "color = green"].iloc[0]
    assert f"| cand | color = green | {green['count']} | {green['baseline_score']:.1%} | " in markdown
    capsys.readouterr()
    assert main(["compare", project, "--models", "base,cand", "--output", str(tmp_path / "c.txt")]) == 2
    assert ".html, .md, .csv" in capsys.readouterr().err
    assert main(["compare", project, "--models", "base"]) == 2
    assert IMPROVEMENT not in set(table["change"])


def test_three_models_each_against_the_baseline(tmp_path):
    rows = []
    for i in range(40):
        first = "dog" if i % 4 == 0 or i == 2 else "cat"  # as above: wrong on 11
        other = "dog" if (i < 20 and i % 2 == 0) or i == 0 else "cat"
        rows.append(f"s{i},x.png,cat,{first},{other},cat,val,{'red' if i < 20 else 'blue'}")
    header = "id,image,label,prediction,pred:other,pred:third,split,attr:color"
    with manifest_project(tmp_path, header, rows) as project:
        result = compare_models(project, ["model", "other", "third"], slices=SliceConfig(max_depth=1, min_support=5))
        with pytest.raises(Exception, match="model\\(s\\) named more than once: model"):
            compare_models(project, ["model", "model"])
    assert result.candidates == ["other", "third"]
    overall = result.overall.set_index("model")
    # `third` is always right: it gains the baseline's 11 failures and loses nothing
    assert overall.loc["third", "p_value"] == binomtest(0, 11).pvalue and overall.loc["third", "change"] == IMPROVEMENT
    assert overall.loc["other", "change"] == UNCHANGED
    assert result.against("third").set_index("description").loc["color = red", "candidate_only"] == 6
    assert len(result.failure_iou) == 3
    iou = pair_matrix(result.failure_iou, result.models, "iou")
    assert iou.loc["third", "model"] == 0.0 and iou.loc["other", "model"] == pytest.approx(0.4)


def test_error_mix_shift_of_a_slice(tmp_path):
    import pandas as pd

    from hibug_core.slices.compare import error_mix_shifts

    folder = planted_pair(tmp_path)
    with Project.open(folder, read_only=True) as project:
        result = compare_models(project, ["base", "cand"], slices=SliceConfig(max_depth=1, min_support=30))
        samples = project.samples("base")
    green = samples["sample_key"].str[1:].astype(int).between(100, 199).reindex(result.evaluation.index)
    wrong = {m: result.evaluation[f"score:{m}"] < 0.5 for m in ("base", "cand")}
    # base's failures are all "missed"; cand's green failures are "localization", the others "missed"
    types = {"base": pd.Series(np.where(wrong["base"], "missed", ""), index=result.evaluation.index),
             "cand": pd.Series(np.where(wrong["cand"], np.where(green, "localization", "missed"), ""),
                               index=result.evaluation.index)}
    shifts = error_mix_shifts(result, types).set_index("description")
    green = shifts.loc["color = green"]
    assert green["missed (baseline)"] == 10 and green["localization (candidate)"] == 50
    assert green["missed (candidate)"] == 0 and green["shift"] == 1.0
    assert shifts.loc["color = red", "shift"] == 0.0
    assert shifts.index[0] == "color = green"


def test_the_ci_recipe_two_prediction_files_to_the_gate_in_three_commands(tmp_path, capsys):
    """As the README shows: the main branch's manifest makes the project, the pull request's predictions on the same
    rows are added, the gate runs."""
    from PIL import Image

    Image.new("RGB", (8, 8)).save(tmp_path / "x.png")
    rng = np.random.default_rng(1)
    colors = np.repeat(["red", "green"], 60)
    main_right = rng.random(120) > 0.1
    pr_right = main_right & ~((colors == "green") & (rng.random(120) < 0.5))
    for name, right in (("main", main_right), ("pr-7", pr_right)):
        rows = [f"x.png,cat,{'cat' if right[i] else 'dog'},val,{colors[i]},s{i}" for i in range(120)]
        (tmp_path / f"{name}.csv").write_text("\n".join(["image,label,prediction,split,attr:color,id", *rows]) + "\n")
    gate = str(tmp_path / "gate")

    def add_version(file: str, name: str) -> int:
        return main(["import", gate, "--manifest", str(tmp_path / f"{file}.csv"), "--model-name", name,
                     "--models-only"])

    assert main(["new", gate, "--manifest", str(tmp_path / "main.csv"), "--model-name", "main"]) == 0
    assert add_version("pr-7", "pr-7") == 0
    assert "added to " in capsys.readouterr().out
    assert main(["check", gate, "--baseline", "main", "--candidate", "pr-7", "--junit", str(tmp_path / "g.xml")]) == 1
    assert "color = green" in capsys.readouterr().out
    # the same rows again: the model is there already; a row the project lacks, or a label that differs, is refused
    assert add_version("pr-7", "pr-7") == 2
    assert "a model named 'pr-7' is already in this project" in capsys.readouterr().err
    lines = (tmp_path / "pr-7.csv").read_text().splitlines()
    lines[3] = lines[3].replace(",s2", ",s999")
    lines[5] = lines[5].replace("x.png,cat,", "x.png,dog,", 1)
    (tmp_path / "pr-8.csv").write_text("\n".join(lines) + "\n")
    assert add_version("pr-8", "pr-8") == 2
    err = capsys.readouterr().err
    assert "row 3, column 'id': 's999' is not in the project" in err
    assert "row 5, column 'label': 'dog' differs from the project's 'cat'" in err
    with Project.open(gate, read_only=True) as project:
        assert project.models() == ["main", "pr-7"]


def test_models_without_tags_are_still_compared_overall_and_per_class(tmp_path, capsys):
    rows = [f"s{i},x.png,{'cat' if i % 2 else 'dog'},{'cat' if i % 2 else 'dog'},cat,val" for i in range(100)]
    manifest_project(tmp_path, "id,image,label,pred:base,pred:cand,split", rows).close()
    project = str(tmp_path / "p")
    assert main(["check", project, "--baseline", "base", "--candidate", "cand", "--no-by-class"]) == 1
    out = capsys.readouterr().out
    # cand calls every dog a cat: the 50 dogs are lost, overall and in the class
    assert "overall  overall" in out and "class    class = dog" in out and "n=50" in out
    with Project.open(project, read_only=True) as opened:
        result = compare_models(opened, ["base", "cand"], slices=SliceConfig(by_class=False))
    assert result.slices.empty and result.overall.set_index("model").loc["cand", "difference"] == -0.5


@pytest.mark.slow
def test_two_detectors_compared_by_iou_with_their_error_mix(detection_demo, tmp_path):
    import pandas as pd

    from hibug_core.slices.compare import error_mix_shifts

    from compare_support import two_detectors

    with Project.open(two_detectors(detection_demo, tmp_path), read_only=True) as project:
        result = compare_models(project, ["main", "v2"])
        types = {m: project.samples(m).join(project.objects(m)[["error_type"]])["error_type"] for m in result.models}
        evaluations = {m: project.object_evaluation(m, "val")["summary"]["AP"] for m in result.models}
    assert result.test == PAIRED_T  # IoU scores
    # shared: the 2,096 ground-truth objects; each model was evaluated on them and its own false positives
    assert len(result.evaluation) == 2096
    assert result.overall.set_index("model")["evaluated"].to_dict() == {"main": 2230, "v2": 2217}
    classes = result.classes.set_index("description")
    assert classes.loc["class = circle", "change"] == REGRESSION
    assert classes.loc["class = circle", "difference"] < classes.loc["class = rectangle", "difference"] < 0
    assert evaluations["v2"] < evaluations["main"]
    # a dropped circle is missed: the circles' failures shift towards "missed"
    shifts = error_mix_shifts(result, {m: pd.Series(t) for m, t in types.items()})
    assert not shifts.empty and {"missed (baseline)", "missed (candidate)"} <= set(shifts.columns)
    circles = shifts[shifts["description"].str.contains("class = circle")]
    assert (circles["missed (candidate)"] > circles["missed (baseline)"]).all()


def test_a_kept_comparison_is_read_back_whole_and_other_settings_are_computed(tmp_path, monkeypatch):
    import pandas as pd

    from hibug_core.slices import kept_comparisons
    from hibug_core.slices.kept_comparisons import kept_comparison

    folder = planted_pair(tmp_path)
    settings = {"slices": SliceConfig(max_depth=2, min_support=10), "config": CompareConfig(alpha=0.1)}
    with Project.open(folder) as project:
        first = kept_comparison(project, ["base", "cand"], **settings)
        assert len(list((folder / "columns").glob("comparison-*.arrow"))) == 6
        computed, read = [], []
        monkeypatch.setattr(kept_comparisons, "compare_models", lambda *a, **k: computed.append(1))
        shared = kept_comparisons.shared_samples
        monkeypatch.setattr(kept_comparisons, "shared_samples", lambda *a: read.append(1) or shared(*a))
        again = kept_comparison(project, ["base", "cand"], **settings)
        assert computed == []  # read back, not computed
        # the tables answer without the shared samples, which are read once when first asked for
        assert again.shared == len(first.evaluation) and again.changes("cand").equals(first.changes("cand"))
        assert read == []
        for part in ("overall", "slices", "classes", "worst_overlap", "failure_iou", "evaluation"):
            pd.testing.assert_frame_equal(getattr(again, part), getattr(first, part), check_dtype=False)
        assert again.test == first.test and again.models == first.models
        assert np.array_equal(again.tags.codes, first.tags.codes) and again.tags.tags == first.tags.tags
        assert read == [1]
        changed = again.changes("cand").query("kind == 'slice'")
        assert changed["description"].iat[0] == "color = green"
        assert again.disagreements(changed["slice_id"].iat[0], "base", "cand").equals(
            first.disagreements(changed["slice_id"].iat[0], "base", "cand"))
    with Project.open(folder, read_only=True) as project:  # other settings on a read-only open: computed, not kept
        kept_comparison(project, ["base", "cand"], slices=SliceConfig(max_depth=1, min_support=10))
    assert computed == [1]
    assert len(list((folder / "columns").glob("comparison-*.arrow"))) == 6
