"""The 2-D embedding map (PCA, UMAP; stored once per set of images) and tags over-represented in a selection."""
from __future__ import annotations

from math import comb

import numpy as np
import pandas as pd
import pytest

from hibug_core.embeddings.compute import embed_project
from hibug_core.embeddings.projection import MapConfig, compute_map, stored_map
from hibug_core.slices.selection import over_represented, tag_counts


def test_pca_map_is_the_first_two_components_and_is_stored(colour_project):
    from sklearn.decomposition import PCA

    embeddings = embed_project(colour_project, "tiny-open_clip")
    config = MapConfig(method="pca")
    assert stored_map(colour_project, "tiny-open_clip", config=config) is None
    layout = compute_map(colour_project, "tiny-open_clip", config=config)
    assert list(layout.index) == list(embeddings.sample_ids) and list(layout.columns) == ["x", "y"]
    _, first, inverse = np.unique(embeddings.hashes, return_index=True, return_inverse=True)
    expected = PCA(n_components=min(50, len(first) - 1), random_state=0).fit_transform(
        embeddings.embedding[first])[:, :2]
    np.testing.assert_allclose(layout.to_numpy(), expected[inverse], rtol=1e-4, atol=1e-5)
    again = stored_map(colour_project, "tiny-open_clip", config=config)
    pd.testing.assert_frame_equal(again, layout, check_dtype=False)
    # the map belongs to a set of image contents: the validation split shows the same 6 pictures, two images do not
    val = colour_project.split_ids(["val"])
    pd.testing.assert_frame_equal(stored_map(colour_project, "tiny-open_clip", sample_ids=val, config=config),
                                  layout.loc[val], check_dtype=False)
    assert stored_map(colour_project, "tiny-open_clip", sample_ids=[1, 2], config=config) is None


@pytest.mark.slow
def test_umap_map_is_seeded(colour_project, tmp_path):
    embed_project(colour_project, "tiny-open_clip")
    config = MapConfig(n_neighbors=5)
    first = compute_map(colour_project, "tiny-open_clip", config=config)
    for name in colour_project.arrays.names("maps/"):
        colour_project.arrays.path(name).unlink()
    second = compute_map(colour_project, "tiny-open_clip", config=config)
    np.testing.assert_allclose(first.to_numpy(), second.to_numpy(), atol=1e-5)
    assert first.notna().all().all() and first["x"].std() > 0


def test_over_represented_tags_with_exact_hypergeometric_p_values():
    tags = pd.DataFrame({
        "color": ["red"] * 4 + ["blue"] * 6,
        "size": ["small", "large"] * 5,
    })
    selected = np.array([True, True, True, False, True, False, False, False, False, False])  # 3 red, 1 blue
    table = over_represented(tags, selected, min_count=2)
    assert list(zip(table["attribute"], table["tag"])) == [("color", "red"), ("size", "small")]
    red = table.iloc[0]
    assert (red["count"], red["share"], red["share_overall"]) == (3, 0.75, 0.4)
    assert red["lift"] == pytest.approx(1.875)
    # P(at least 3 of the 4 selected are red | 4 red among 10)
    expected = sum(comb(4, k) * comb(6, 4 - k) for k in (3, 4)) / comb(10, 4)
    assert red["p_value"] == pytest.approx(expected)
    small = table.iloc[1]  # rows 0, 2, 4 are small: 3 of 4 selected, 5 of 10 overall
    assert small["p_value"] == pytest.approx(sum(comb(5, k) * comb(5, 4 - k) for k in (3, 4)) / comb(10, 4))
    assert (red["p_value"], small["p_value"]) == pytest.approx((25 / 210, 55 / 210))
    assert table["q_value"].tolist() == pytest.approx([50 / 210, 55 / 210])  # Benjamini-Hochberg over the two
    assert over_represented(tags, np.zeros(10, dtype=bool)).empty
    # categorical columns (the map's tags: counted from their codes, nothing hashed) give the same table, unused
    # categories and missing tags included
    as_categories = tags.assign(color=pd.Categorical(tags["color"], categories=["blue", "green", "red"]),
                                size=pd.Categorical(tags["size"].where(tags.index != 9)))
    with_gap = tags.assign(size=tags["size"].where(tags.index != 9))
    pd.testing.assert_frame_equal(over_represented(as_categories, selected, min_count=2),
                                  over_represented(with_gap, selected, min_count=2))
    # every row's counts, in the order of the codes (missing tags not counted), and handed in as a caller keeps them
    counted = tag_counts(as_categories)
    assert {a: c.tolist() for a, c in counted.items()} == {"color": [6, 0, 4], "size": [4, 5]}
    assert tag_counts(with_gap)["size"].tolist() == [5, 4]  # factorised: "small" first seen
    pd.testing.assert_frame_equal(over_represented(as_categories, selected, min_count=2, overall=counted),
                                  over_represented(as_categories, selected, min_count=2))


def test_points_inside_a_lasso_and_a_box_worked_by_hand():
    from hibug_core.embeddings.map_selection import inside_box, inside_polygon

    # A concave "C": the square (0,0)-(4,4) less its notch (1,1)-(4,3).
    lasso_x, lasso_y = [0, 4, 4, 1, 1, 4, 4, 0], [0, 0, 1, 1, 3, 3, 4, 4]
    x = np.array([0.5, 2.0, 2.0, 2.0, 0.5, 5.0, -1.0, 3.5])
    y = np.array([2.0, 0.5, 2.0, 3.5, 3.9, 2.0, 2.0, 3.5])
    assert inside_polygon(x, y, lasso_x, lasso_y).tolist() == [True, True, False, True, True, False, False, True]
    assert inside_polygon(x, y, [0, 1], [0, 1]).tolist() == [False] * 8  # a line selects nothing
    assert inside_box(x, y, [3, 0], [4, 2]).tolist() == [True, False, True, True, True, False, False, False]
    with pytest.raises(ValueError, match="as many x as y"):
        inside_polygon(x, y, [0, 1, 2], [0, 1])


def test_a_lasso_selects_exactly_what_a_reference_ray_cast_does_on_a_million_points():
    from hibug_core.embeddings.map_selection import inside_polygon

    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(2, 1_000_000)).astype(np.float32)
    angle = np.linspace(0, 2 * np.pi, 60, endpoint=False)
    radius = 1 + 0.5 * np.sin(5 * angle)  # a star: concave in ten places
    lasso_x, lasso_y = radius * np.cos(angle), radius * np.sin(angle)
    got = inside_polygon(x, y, lasso_x, lasso_y)
    # the reference: the same even-odd rule in plain numpy over the first 20,000 points
    assert np.array_equal(got[:20_000], reference_inside(x[:20_000], y[:20_000], lasso_x, lasso_y))
    assert int(got.sum()) == 391_215
    # a hand's lasso: hundreds of corners, crossing itself (even-odd), a point tested against its band's edges only
    walk_x, walk_y = np.cumsum(rng.normal(0, 0.2, size=(2, 400)), axis=1)
    walk = inside_polygon(x, y, walk_x, walk_y)
    assert np.array_equal(walk[:20_000], reference_inside(x[:20_000], y[:20_000], walk_x, walk_y))
    assert 0 < walk.sum() < len(x)
    flat = inside_polygon(x, y, [0, 1, 2, 0.5], [0.25] * 4)  # no height: nothing inside
    assert not flat.any()
    assert not inside_polygon(x, y, [0, 1, np.nan], [0, 1, 1]).any()  # a corner not a number: nothing selected


def reference_inside(px, py, lasso_x, lasso_y) -> np.ndarray:
    """The even-odd rule in plain numpy, every edge against every point."""
    px, py, inside = px.astype(float), py.astype(float), np.zeros(len(px), dtype=bool)
    for k in range(len(lasso_x)):
        xk, yk, xj, yj = lasso_x[k], lasso_y[k], lasso_x[k - 1], lasso_y[k - 1]
        crosses = (yk > py) != (yj > py)
        with np.errstate(divide="ignore", invalid="ignore"):
            inside ^= crosses & (px < (xj - xk) * (py - yk) / (yj - yk) + xk)
    return inside


def test_counts_and_values_at_positions_read_the_codes_once():
    from hibug_core.slices.selection import counts_at, present_values

    column = pd.Series(pd.Categorical(["a", "b", None, "a", "c", "b"], categories=["a", "b", "c", "d"]))
    assert counts_at(column.cat.codes.to_numpy(), np.array([0, 2, 3, 5]), 4).tolist() == [2, 1, 0, 0]
    assert present_values(column, np.array([1, 2, 4])) == {"b", "c"}
    assert present_values(column, np.array([], dtype=np.int64)) == set()
    assert present_values(column.astype(object), np.array([0, 2, 5])) == {"a", "b"}  # not categorical: as found


def test_a_grids_filter_choices_are_the_classes_and_tags_its_rows_hold():
    from hibug_core.slices.selection import filter_choices

    tags = pd.DataFrame({"color": pd.Categorical(["red", "blue", None, "red"], categories=["blue", "green", "red"]),
                         "size": ["big", "small", "small", None]}, index=[10, 11, 12, 13])
    rows = pd.DataFrame({"label": ["cat", None, "ant"]}, index=[13, 12, 99])  # 99: a row without tags
    assert filter_choices(rows, tags) == (["ant", "cat"], ["color = red", "size = small"])
    # the same by the rows' positions among the tags' rows, where the caller knows them (-1: not there)
    assert filter_choices(rows, tags, at=np.array([3, 2, -1])) == (["ant", "cat"], ["color = red", "size = small"])
    assert filter_choices(rows.drop(columns="label"), None) == ([], [])
