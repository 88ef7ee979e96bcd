"""Honest slices: a slice is reported only when it is significantly worse than the whole (and than each parent), a bug
type only where its own evidence is significant, and an empty report says what the data allow."""
from __future__ import annotations

import numpy as np
import pytest

from hibug_core.slices.diagnosis import NO_CLEAR_CAUSE, diagnose
from hibug_core.slices.search import SliceConfig, smallest_significant_gap
from hibug_core.stats import worse_than_rest_p_values

from compare_support import manifest_project


def _bug_free(folder, seed: int):
    """800 validation and 800 training images, five attributes of random tags, predictions right 80% of the time
    whatever the tags."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(1600):
        tags = ",".join(f"t{rng.integers(3)}" for _ in range(5))
        right = rng.random() < 0.8
        rows.append(f"s{i},x.png,cat,{'cat' if right else 'dog'},{'val' if i < 800 else 'train'},{tags}")
    header = "id,image,label,prediction,split," + ",".join(f"attr:noise{a}" for a in range(5))
    return manifest_project(folder, header, rows)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_manifest_with_no_bug_reports_no_slice_and_says_what_the_data_allow(tmp_path, seed):
    from hibug_core.slices.report import error_slices

    with _bug_free(tmp_path, seed) as project:
        report = error_slices(project, check_tags=False)
        plain = error_slices(project, check_tags=False, config=SliceConfig(alpha=1.0, parent_alpha=1.0))
    assert report.slices.empty and len(plain.slices) > 0  # the plain rule would report chance slices
    verdict = report.empty_verdict()
    assert verdict.startswith("Nothing significant at this size: ")
    assert "slices tested over 800 samples" in verdict and "a slice of 10 would have to score" in verdict
    assert "What would help: more val samples, a lower minimum size M" in verdict


def test_hibug_slices_prints_the_empty_verdict(tmp_path, capsys):
    from hibug_core.cli import main

    _bug_free(tmp_path, 0).close()
    assert main(["slices", str(tmp_path / "p")]) == 0
    out = capsys.readouterr().out
    assert "0 error slices" in out and "Nothing significant at this size" in out


def test_the_smallest_significant_gap_is_where_the_test_crosses_alpha():
    n, overall, size, alpha, tested = 800, 0.8, 30, 0.05, 500
    gap = smallest_significant_gap(n, overall, size, alpha, tested)
    error = 1 - overall
    slice_errors = size * (error + gap)  # the slice scores `gap` below the overall score, the whole stays at it
    p = worse_than_rest_p_values(np.array([slice_errors]), np.array([size]), error * n, n, error * (1 - error))
    assert p[0] * tested == pytest.approx(alpha, rel=1e-6)
    assert smallest_significant_gap(n, overall, 80, alpha, tested) < gap  # a larger slice needs less
    assert smallest_significant_gap(n, overall, n, alpha, tested) == float("inf")


def test_few_errors_are_tested_exactly_as_fishers_test_and_many_by_the_normal_approximation():
    from scipy.stats import fisher_exact

    n, total = 800, 100
    variance = total / n * (1 - total / n)
    for errors, size in [(6, 20), (3, 10), (10, 30), (4, 12)]:  # expected errors under 20: exact
        p = worse_than_rest_p_values(np.array([errors]), np.array([size]), total, n, variance, binary=True)[0]
        table = [[errors, size - errors], [total - errors, n - total - (size - errors)]]
        assert p == pytest.approx(fisher_exact(table, alternative="greater").pvalue, rel=1e-9)
        # the normal approximation makes these few errors look rarer than they are
        assert worse_than_rest_p_values(np.array([errors]), np.array([size]), total, n, variance)[0] < p
    large = worse_than_rest_p_values(np.array([40]), np.array([200]), total, n, variance, binary=True)
    assert large == pytest.approx(worse_than_rest_p_values(np.array([40]), np.array([200]), total, n, variance))
    # scores in [0, 1] are never tested as counts
    assert worse_than_rest_p_values(np.array([6.0]), np.array([20]), total, n, variance)[0] == pytest.approx(0.008274,
                                                                                                           abs=1e-6)


def test_the_exact_smallest_significant_gap_is_where_the_exact_test_crosses_alpha():
    n, overall, size, alpha, tested = 800, 0.875, 30, 0.05, 1000
    gap = smallest_significant_gap(n, overall, size, alpha, tested, binary=True)
    errors = round(size * (1 - overall + gap))
    total, variance = round(n * (1 - overall)), overall * (1 - overall)
    p = worse_than_rest_p_values(np.array([errors - 1, errors]), np.array([size, size]), total, n, variance,
                                 binary=True)
    assert p[1] <= alpha / tested < p[0]  # the fewest errors that pass
    assert gap > smallest_significant_gap(n, overall, size, alpha, tested)  # more than the approximation asked


def test_a_bug_free_slice_that_the_normal_approximation_reports_is_not_reported():
    from unittest import mock

    import pandas as pd

    import hibug_core.stats as stats
    from hibug_core.slices.search import TagMatrix, find_error_slices

    rng = np.random.default_rng(49)  # errors independent of every tag
    frame = pd.DataFrame({f"a{i}": rng.choice([f"t{j}" for j in range(4)], 800) for i in range(8)})
    errors = (rng.random(800) < 0.1).astype(float)
    tags = TagMatrix.from_frame(frame)
    with mock.patch.object(stats, "EXACT_BELOW", 0.0):  # the normal approximation everywhere
        approximated = find_error_slices(tags, errors)
    # two slices of 13 with 7 and 6 errors (10% overall): p = 1.9e-8 and 2.8e-6 by the approximation
    assert approximated["description"].tolist() == ["a0 = t3 & a1 = t0 & a3 = t2", "a0 = t2 & a2 = t1 & a7 = t2"]
    assert approximated["count"].tolist() == [13, 13]
    assert len(find_error_slices(tags, errors)) == 0


def test_a_slice_worse_by_chance_is_not_reported_one_worse_for_real_is():
    import pandas as pd

    from hibug_core.slices.search import TagMatrix, find_error_slices

    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"color": rng.choice(["red", "green", "blue"], 900), "size": rng.choice(["s", "l"], 900)})
    errors = (rng.random(900) > 0.85).astype(float)
    planted = (frame["color"] == "blue").to_numpy() & (rng.random(900) < 0.5)
    errors[planted] = 1.0
    found = find_error_slices(TagMatrix.from_frame(frame), errors, SliceConfig(max_depth=2))
    assert found["description"].tolist()[0] == "color = blue"
    assert (found["q_value"] < 0.05).all()
    assert found.attrs["alpha"] == 0.05


def test_a_bug_type_only_where_its_own_evidence_is_significant():
    # 40 evaluation images, 17 of them (42.5%) in the slice; 10 training images, 2 of them (20%) in it: a shift by
    # the thresholds, but 2 of 10 is what 42.5% would give often enough (p = 0.13), so no clear cause
    labels = np.array(["cat"] * 40)
    predictions = np.array(["cat", "dog", "cow", "bird"] * 10)
    errors = (labels != predictions).astype(float)
    in_slice = np.r_[np.ones(17, bool), np.zeros(23, bool)]
    train = np.r_[np.ones(2, bool), np.zeros(8, bool)]
    typed = diagnose([in_slice], [train], labels, predictions, errors)
    assert typed.at[0, "bug_type"] == NO_CLEAR_CAUSE
    assert typed.at[0, "reason"] == ("2 in training (20.0%) against 42.5% of evaluation: too few to tell rare from "
                                     "common")
    # the same shares on 100 times the images are a distribution shift
    many = diagnose([np.tile(in_slice, 100)], [np.tile(train, 100)], np.tile(labels, 100), np.tile(predictions, 100),
                    np.tile(errors, 100))
    assert many.at[0, "bug_type"] == "distribution shift"
    # with alpha 1 (no test) the thresholds alone decide, as before
    assert diagnose([in_slice], [train], labels, predictions, errors, alpha=1.0).at[0, "bug_type"] == \
        "distribution shift"


# ----- the slips a newcomer met ---------------------------------------------------------------------------------------
def test_times_are_said_in_words():
    import datetime

    from hibug_ui.widgets import in_words

    now = datetime.datetime(2026, 11, 27, 18, 20, tzinfo=datetime.timezone.utc)
    assert [in_words(stamp, now) for stamp in ("2026-11-27T18:19:40+00:00", "2026-11-27T18:19:00+00:00",
                                               "2026-11-27T18:05:00+00:00", "2026-11-27T15:20:00+00:00",
                                               "2026-11-20T09:05:00+00:00", "not a time")] == [
        "just now", "1 minute ago", "15 minutes ago", "3 hours ago", "20 Nov 2026, 09:05 UTC", "not a time"]


def test_a_shared_server_never_offers_its_own_account_as_a_visitors_name(monkeypatch, demo_project):
    from page_support import open_page, serve

    serve(monkeypatch, project=demo_project, address="0.0.0.0", open_to_anyone=True)
    monkeypatch.setenv("HIBUG_USER", "root")
    at = open_page(monkeypatch, "pages/6_Review.py", demo_project)
    assert not at.exception
    assert next(t for t in at.sidebar.text_input if t.label == "Your name").value == ""
    assert "root" not in " ".join(c.value for c in at.sidebar.caption)


def test_every_problem_list_counts_all_its_problems(tmp_path, capsys):
    from hibug_core.cli import main

    from compare_support import manifest_project

    manifest_project(tmp_path, "id,image,label,prediction", [f"s{i},x.png,cat,cat" for i in range(3)]).close()
    (tmp_path / "more.csv").write_text("id,image,label,pred:other\n" + "".join(f"x{i},x.png,cat,cat\n"
                                                                                for i in range(250)))
    capsys.readouterr()
    assert main(["import", str(tmp_path / "p"), "--models-only", "--manifest", str(tmp_path / "more.csv")]) == 2
    err = capsys.readouterr().err
    assert "more.csv: 250 problems found, the first 20 below; nothing was imported." in err
    assert err.rstrip().endswith("... and 230 more")
