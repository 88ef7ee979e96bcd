"""Selection baselines from active learning (margin, Coreset, BADGE) and selection by expected failures: exact on hand
examples, and what each one picks on the demo's pool (its network's stored probabilities and features)."""
from __future__ import annotations

import numpy as np
import pytest

from hibug_core.repair.active_learning import badge, k_center_greedy
from hibug_core.repair.expected_failures import SHRINK, slice_rates
from hibug_core.repair.pool_outputs import PoolOutputsError, margins
from hibug_core.repair.selection import SelectionConfig, select_pool
from hibug_core.slices.report import error_slices
from hibug_core.slices.search import SliceConfig
from hibug_core.store.project import Project


def test_k_center_greedy_takes_the_farthest_point_each_time():
    points = np.array([[0.0, 0.0], [1.0, 0.0], [10.0, 0.0], [10.0, 1.0], [5.0, 5.0]])
    labelled = np.array([[0.0, 0.1]])
    # farthest from the labelled point: (10, 1); then (5, 5) (41 from it, 49.01 from the label); then (1, 0), 1.01
    # from the label, just ahead of (10, 0), 1 from (10, 1)
    assert k_center_greedy(points, labelled, 3).tolist() == [3, 4, 1]
    assert k_center_greedy(points, labelled[:0], 2).tolist() == [0, 3]  # no labelled set: the first, then farthest
    assert margins(np.array([[0.5, 0.3, 0.2], [0.9, 0.05, 0.05]])) == pytest.approx([0.2, 0.85])


def test_badge_distances_equal_those_of_the_materialised_gradient_embeddings():
    """k-means++ on (p - onehot) x h, computed without building the outer products, picks what the materialised
    embeddings pick under the same random draws."""
    rng = np.random.default_rng(0)
    probabilities = rng.dirichlet(np.ones(4), 60).astype(np.float32)
    hidden = rng.normal(size=(60, 5)).astype(np.float32)
    chosen = badge(probabilities, hidden, 8, seed=3).tolist()
    residual = probabilities.astype(np.float64)
    residual[np.arange(60), residual.argmax(1)] -= 1
    embedding = (residual[:, :, None] * hidden.astype(np.float64)[:, None, :]).reshape(60, -1)
    draws, expected = np.random.default_rng(3), [int(np.argmax((embedding ** 2).sum(1)))]
    while len(expected) < 8:
        nearest = ((embedding[:, None, :] - embedding[expected][None]) ** 2).sum(-1).min(1)
        expected.append(int(draws.choice(60, p=nearest / nearest.sum())))
    assert chosen == expected


def test_slice_rates_shrink_small_slices_and_leave_each_validation_image_out():
    errors = np.array([1, 1, 0, 0, 1, 0], float)
    masks = [np.array([1, 1, 1, 0, 0, 0], bool), np.array([0, 0, 1, 1, 0, 0], bool)]
    failures, counts, overall = np.array([2.0, 0.0]), np.array([3.0, 2.0]), 0.5
    rates, owner = slice_rates(masks, failures, counts, overall, outside=0.25, own_error=errors)
    first_out = (2 - 1 + SHRINK * 0.5) / (3 - 1 + SHRINK)  # a failing image of the first slice, left out
    assert rates[:2] == pytest.approx([first_out] * 2) and owner.tolist() == [0, 0, 0, 1, -1, -1]
    assert rates[2] == pytest.approx((2 + SHRINK * 0.5) / (2 + SHRINK))  # its best slice, the first, without it
    assert rates[3] == pytest.approx((0 + SHRINK * 0.5) / (1 + SHRINK)) and rates[4:].tolist() == [0.25, 0.25]


def test_expected_failures_without_stored_outputs_ranks_by_slice_and_confidence(slice_project):
    report = error_slices(slice_project, config=SliceConfig(max_depth=2, min_support=5))
    chosen = select_pool(report, SelectionConfig(method="expected failures", budget=4), project=slice_project)
    names = list(slice_project.samples(sample_ids=chosen.index)["sample_key"])
    assert all(n.startswith("p-blue-") for n in names)  # the blue slices fail 80%, red ones 7%
    assert chosen["reason"].str.match(r"expected failures: chance 0\.\d\d of failing").all()
    with pytest.raises(PoolOutputsError, match="no stored class probabilities .* margin and BADGE need them"):
        select_pool(report, SelectionConfig(method="margin", budget=4), project=slice_project)
    with pytest.raises(PoolOutputsError, match="no stored features \\(imported predictions\\)"):
        select_pool(report, SelectionConfig(method="coreset", budget=4), project=slice_project)


@pytest.mark.parametrize("method, blue, small_triangles, wrong", [
    ("margin", 32, 50, 55), ("coreset", 44, 36, 47), ("badge", 31, 36, 48), ("expected failures", 91, 52, 84)])
def test_each_method_on_the_demo_pool(demo_project, method, blue, small_triangles, wrong):
    """What each method takes at 10% (138 images) from the demo's 800-image pool: the planted slices' images and the
    ones the network gets wrong (random: 20, 21, 20; uncertainty: 32, 49, 55; hibug: 71, 47, 53)."""
    with Project.open(demo_project) as project:
        report = error_slices(project, "shape-cnn")
        chosen = select_pool(report, SelectionConfig(method=method, budget=0.1), project=project)
        tags = project.known_tags().loc[chosen.index]
        outcome = project.samples("shape-cnn").loc[chosen.index, "correct"]
    assert len(chosen) == 138 and chosen.index.is_unique
    assert ((tags["color"] == "blue").sum(), ((tags["size"] == "small") & (tags["shape"] == "triangle")).sum(),
            int((~outcome.astype(bool)).sum())) == (blue, small_triangles, wrong)
