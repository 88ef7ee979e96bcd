"""Instance masks as COCO writes them (polygons, or run-length encodings compressed or not): checked against their
image, and turned into pixels, areas and boxes with faster-coco-eval's mask API (pycocotools' own code)."""
from __future__ import annotations

import math

import numpy as np

from hibug_core.values import finite_numbers

MASK_FORMS = "a list of polygons [[x1, y1, x2, y2, ...], ...] or a run-length encoding {\"size\": [height, width], " \
             "\"counts\": ...}"
MAX_MASK_POINTS = 50_000  # polygon points of one mask (COCO's largest masks have a few hundred)
MAX_MASK_OUTLINE = 2_000_000  # pixels of outline drawn for one mask: the library's polygon drawing holds ~55 bytes a
# pixel of outline while it draws (measured), so one mask stays near 100 MB whatever its numbers
POLYGON_SCALE = 5  # the library draws polygons at 5x their pixels (pycocotools' rleFrPoly)
MAX_OBJECTS_PER_IMAGE = 10_000  # objects or results on one image (COCO's most crowded image has ~100; LVIS' ~800)


def segmentation_problem(value, width: int, height: int) -> str | None:
    """Why `value` is not a COCO mask of an image `width` x `height` pixels (None when it is): a polygon needs three
    points or more of finite numbers within one image size of its image, and an outline hibug can afford to draw; a
    run-length encoding the image's size and counts that cover it exactly (compressed counts are decoded to check)."""
    if not (width and height):
        return "its image needs its 'width' and 'height' in 'images' (a mask is drawn on them)"
    if isinstance(value, list):
        if not value:
            return f"is empty; give {MASK_FORMS}"
        points = outline = 0
        for polygon in value:
            if not isinstance(polygon, list) or len(polygon) < 6 or len(polygon) % 2:
                return "each polygon is a flat list [x1, y1, x2, y2, ...] of three points or more"
            points += len(polygon) // 2
            if points > MAX_MASK_POINTS:
                return f"has more than {MAX_MASK_POINTS:,} polygon points; simplify the outline"
            if not finite_numbers(polygon):
                return "a polygon's coordinates must be finite numbers (pixels)"
            xy = np.asarray(polygon, dtype=np.float64).reshape(-1, 2)
            far = (xy[:, 0] < -width) | (xy[:, 0] > 2 * width) | (xy[:, 1] < -height) | (xy[:, 1] > 2 * height)
            if far.any():
                x, y = xy[np.flatnonzero(far)[0]]
                return (f"has a point ({x:.6g}, {y:.6g}) far outside its image ({width} x {height}); polygons are in "
                        "the pixels of the image the record's width and height describe")
            outline += _outline_pixels(xy)
        if outline > MAX_MASK_OUTLINE:
            return (f"its outline is {outline:,} pixels long, more than the {MAX_MASK_OUTLINE:,} hibug draws for one "
                    "mask; simplify it")
        return None
    if isinstance(value, dict):
        size, counts = value.get("size"), value.get("counts")
        if not (isinstance(size, list) and len(size) == 2 and all(_whole(v) for v in size)):
            return "a run-length encoding needs 'size': [height, width]"
        if list(size) != [height, width]:
            return f"its size {size} is not its image's [height, width] = [{height}, {width}]"
        if isinstance(counts, list):
            if not all(_whole(c) and c >= 0 for c in counts):
                return "uncompressed 'counts' must be whole numbers, 0 or more"
            if sum(counts) != size[0] * size[1]:
                return f"its counts cover {sum(counts):,} pixels, not the image's {size[0] * size[1]:,}"
            return None
        if isinstance(counts, str) and counts:
            return _compressed_problem(counts, height, width)
        return "a run-length encoding needs 'counts' (a compressed string or a list of run lengths)"
    return f"must be {MASK_FORMS}"


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _outline_pixels(xy: np.ndarray) -> int:
    """Points the library walks to draw the closed polygon `xy` (k, 2): along each edge's longer side, at its scale."""
    steps = np.abs(np.rint(POLYGON_SCALE * np.roll(xy, -1, axis=0)) - np.rint(POLYGON_SCALE * xy)).max(axis=1)
    return int(steps.sum() // POLYGON_SCALE) + len(xy)


def _compressed_problem(counts: str, height: int, width: int) -> str | None:
    """Why compressed run lengths do not cover an image of height x width exactly (None when they do), read by the
    library without drawing a pixel."""
    from faster_coco_eval import mask_api_new_cpp

    try:
        runs = mask_api_new_cpp.toUncompressedRLE([{"size": [height, width], "counts": counts.encode()}])[0]["counts"]
    except (RuntimeError, ValueError, UnicodeError):
        return "its compressed 'counts' are not a COCO run-length encoding"
    runs = np.asarray(runs, dtype=np.int64)
    if (runs < 0).any() or int(runs.sum()) != height * width:
        return (f"its compressed 'counts' cover {int(runs.clip(0).sum()):,} pixels, not the image's "
                f"{height * width:,}; encode the mask at its image's size")
    return None


def encoded(value, width: int, height: int) -> dict:
    """A checked mask as one compressed run-length encoding (polygons merged, as pycocotools does)."""
    from faster_coco_eval.core import mask

    if isinstance(value, list):
        return mask.merge(mask.frPyObjects(value, height, width))
    if isinstance(value["counts"], list):
        return mask.frPyObjects(value, height, width)
    return {"size": list(value["size"]), "counts": value["counts"]}


def area(value, width: int, height: int) -> float:
    """Pixels the mask covers."""
    from faster_coco_eval.core import mask

    return float(mask.area(encoded(value, width, height)))


def box(value, width: int, height: int) -> list[float]:
    """The mask's bounding box [x, y, width, height] in pixels."""
    from faster_coco_eval.core import mask

    return [float(v) for v in mask.toBbox(encoded(value, width, height))]


def pixels(value, width: int, height: int) -> np.ndarray:
    """The mask as a (height, width) bool array."""
    from faster_coco_eval.core import mask

    return mask.decode(encoded(value, width, height)).astype(bool)


def mask_iou(found: list, truth: list, width: int, height: int) -> np.ndarray:
    """IoU of every mask in `found` (rows) against every mask in `truth` (columns), all of one image `width` x
    `height`, by the library's own routine (COCO's segm IoU)."""
    from faster_coco_eval.core import mask

    if not found or not truth:
        return np.zeros((len(found), len(truth)))
    overlap = mask.iou([encoded(v, width, height) for v in found], [encoded(v, width, height) for v in truth],
                       [0] * len(truth))
    return np.asarray(overlap, dtype=np.float64).reshape(len(found), len(truth))


BOUNDARY_DILATION = 0.02  # Cheng et al.'s d: the boundary region's width, a share of the image's diagonal


def paired_boundary_ious(found: list, truth: list, image_ids: list[int], sizes: dict[int, tuple[int, int]],
                         dilation: float = BOUNDARY_DILATION) -> np.ndarray:
    """The Boundary IoU (Cheng et al. 2021) of each pair (found[k], truth[k]) of compressed masks on image
    image_ids[k] (sizes: image id -> (width, height)): the IoU of their boundary regions, each mask's pixels within
    d = dilation x its image's diagonal (rounded, at least 1) of a pixel outside it, the image's border included, as
    the paper's code erodes. Outside the pair's union box both masks are empty, so each pair is measured on that box
    alone, all pairs of one d at once on a canvas."""
    from scipy import ndimage

    if not found:
        return np.zeros(0)
    n = len(found)
    forms = library_forms([*found, *truth])
    runs, boxes = run_lengths(forms), stored_boxes(forms).astype(np.int64)
    corners = np.c_[boxes[:, :2], boxes[:, :2] + boxes[:, 2:]]
    drawn = boxes[:, 2] * boxes[:, 3] > 0
    low = np.where(drawn[:, None], corners[:, :2], np.iinfo(np.int64).max)
    high = np.where(drawn[:, None], corners[:, 2:], -1)
    left_top = np.minimum(low[:n], low[n:])
    right_bottom = np.maximum(high[:n], high[n:])
    radius = np.array([max(1, int(round(dilation * math.hypot(*sizes[int(i)])))) for i in image_ids])
    out = np.zeros(n)
    measured = np.flatnonzero((right_bottom > left_top).all(axis=1))
    for d in np.unique(radius[measured]):
        pairs = measured[radius[measured] == d]
        crops = {k: (*left_top[k], *(right_bottom[k] - left_top[k])) for k in pairs}
        for group in canvas_groups([(crops[k][3], crops[k][2]) for k in pairs]):
            chosen = pairs[group]
            regions = []
            for side in (0, n):
                canvas, starts, _ = laid_out([box_pixels(*runs[side + k], crops[k]) for k in chosen])
                eroded = canvas.view(np.uint8)
                for axis in (0, 1):
                    eroded = ndimage.minimum_filter1d(eroded, 2 * int(d) + 1, axis=axis, mode="constant", cval=0)
                regions.append(canvas & ~eroded.astype(bool))
            inside = np.add.reduceat((regions[0] & regions[1]).sum(axis=1), starts)
            union = np.add.reduceat((regions[0] | regions[1]).sum(axis=1), starts)
            out[chosen] = np.where(union > 0, inside / np.maximum(union, 1), 0.0)
    return out


CANVAS_PIXELS = 1 << 22  # the most pixels crops are laid out together in


def canvas_groups(shapes: list[tuple[int, int]], budget: int = CANVAS_PIXELS) -> list[np.ndarray]:
    """Crops of (height, width) `shapes` (their indices) in groups of similar widths whose canvases (laid_out())
    stay within `budget` pixels (a crop larger than that alone)."""
    order = np.argsort([width for _, width in shapes], kind="stable")
    groups, group, rows = [], [], 0
    for index in order:
        height, width = shapes[index]
        if group and (rows + height + 2) * (width + 2) > budget:
            groups.append(np.array(group))
            group, rows = [], 0
        group.append(int(index))
        rows += height + 2
    return groups + ([np.array(group)] if group else [])


def laid_out(crops: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Crops (bool) one under another on a canvas, each in a ring of background one pixel wide: (the canvas, the
    first row of each crop's tile, each row's crop). Nothing measured within a crop's tile reaches another's."""
    heights = np.array([crop.shape[0] for crop in crops]) + 2
    starts = np.r_[0, np.cumsum(heights)[:-1]]
    canvas = np.zeros((int(heights.sum()), max(crop.shape[1] for crop in crops) + 2), bool)
    for crop, start in zip(crops, starts):
        canvas[start + 1:start + 1 + crop.shape[0], 1:1 + crop.shape[1]] = crop
    return canvas, starts, np.repeat(np.arange(len(crops)), heights)


def compressed(value, width: int, height: int) -> dict:
    """A checked mask as one compressed run-length encoding with its counts as text, as COCO's JSON writes it: the
    form every later step reads without converting it again."""
    return _as_text(encoded(value, width, height))


def from_pixels(stack: np.ndarray) -> list[dict]:
    """(n, height, width) masks as compressed run-length encodings with their counts as text (compressed()'s form),
    encoded by the library at once."""
    from faster_coco_eval.core import mask

    if not len(stack):
        return []
    return [_as_text(rle) for rle in mask.encode(np.asfortranarray(np.asarray(stack, np.uint8).transpose(1, 2, 0)))]


def _as_text(rle: dict) -> dict:
    counts = rle["counts"]
    return {"size": [int(v) for v in rle["size"]], "counts": counts.decode() if isinstance(counts, bytes) else counts}


def stored(value, width: int, height: int) -> str:
    """A checked mask as the store keeps it: one compressed run-length encoding, as JSON {"size", "counts"}."""
    import json

    return json.dumps(compressed(value, width, height))


def stored_pixels(text: str) -> np.ndarray:
    """A stored mask (stored()) as a (height, width) bool array."""

    from faster_coco_eval.core import mask

    return mask.decode(library_forms([text])[0]).astype(bool)


def stored_boxes(texts: list) -> np.ndarray:
    """The boxes (x, y, width, height; whole pixels) of stored masks (stored(), or compressed() as they are), read
    from their run-length encodings by the library, without decoding their pixels."""
    from faster_coco_eval.core import mask

    if not len(texts):
        return np.zeros((0, 4))
    return np.asarray(mask.toBbox(library_forms(texts)), dtype=np.float64).reshape(len(texts), 4)


def library_forms(values: list) -> list[dict]:
    """Stored masks (text) or compressed ones (dicts with text counts) as the library's functions take them (forms
    already so pass as they are: read the masks once, then hand the forms to run_lengths and stored_boxes)."""
    import json

    rles = [json.loads(value) if isinstance(value, str) else value for value in values]
    return [{"size": r["size"], "counts": r["counts"].encode() if isinstance(r["counts"], str) else r["counts"]}
            for r in rles]


def run_lengths(texts: list) -> list[tuple[int, np.ndarray]]:
    """Stored masks (stored(), or compressed() as they are) as (image height, run lengths) in column-major order,
    the first run of 0s, decoded from their compressed encodings by the library at once."""
    from faster_coco_eval import mask_api_new_cpp

    rles = library_forms(texts)
    plain = mask_api_new_cpp.toUncompressedRLE(rles)
    return [(int(r["size"][0]), np.asarray(u["counts"], dtype=np.int64)) for r, u in zip(rles, plain)]


def box_pixels(height: int, counts: np.ndarray, box: tuple[int, int, int, int]) -> np.ndarray:
    """The part of a mask (run_lengths()) inside box (x, y, width, height) as a bool array, from the runs that cross
    the box's columns only: a mask is measured without drawing its whole image."""
    x, y, width, tall = box
    ends = np.cumsum(counts)
    starts = ends - counts
    first, last = x * height, (x + width) * height
    crossing = (ends > first) & (starts < last)
    lengths = np.clip(ends[crossing], first, last) - np.clip(starts[crossing], first, last)
    values = (np.flatnonzero(crossing) % 2).astype(bool)  # runs alternate: 0s, 1s, 0s, ...
    return np.repeat(values, lengths).reshape(width, height).T[y:y + tall]
