"""Instance masks as COCO writes them (polygons, or run-length encodings compressed or not): checked against their
image, and turned into pixels, areas and boxes with faster-coco-eval's mask API (pycocotools' own code)."""
from __future__ import annotations

import math

import numpy as np

MASK_FORMS = "a list of polygons [[x1, y1, x2, y2, ...], ...] or a run-length encoding {\"size\": [height, width], " \
             "\"counts\": ...}"


def segmentation_problem(value, width: int, height: int) -> str | None:
    """Why `value` is not a COCO mask of an image `width` x `height` pixels (None when it is): a polygon needs three
    points or more of finite numbers; a run-length encoding the image's size and counts that cover it."""
    if not (width and height):
        return "its image needs its 'width' and 'height' in 'images' (a mask is drawn on them)"
    if isinstance(value, list):
        if not value:
            return f"is empty; give {MASK_FORMS}"
        for polygon in value:
            if not isinstance(polygon, list) or len(polygon) < 6 or len(polygon) % 2:
                return "each polygon is a flat list [x1, y1, x2, y2, ...] of three points or more"
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in polygon):
                return "a polygon's coordinates must be finite numbers (pixels)"
        return None
    if isinstance(value, dict):
        size, counts = value.get("size"), value.get("counts")
        if not (isinstance(size, list) and len(size) == 2 and all(isinstance(v, int) for v in size)):
            return "a run-length encoding needs 'size': [height, width]"
        if list(size) != [height, width]:
            return f"its size {size} is not its image's [height, width] = [{height}, {width}]"
        if isinstance(counts, list):
            if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts):
                return "uncompressed 'counts' must be whole numbers, 0 or more"
            if sum(counts) != size[0] * size[1]:
                return f"its counts cover {sum(counts)} pixels, not the image's {size[0] * size[1]}"
            return None
        if isinstance(counts, str) and counts:
            return None
        return "a run-length encoding needs 'counts' (a compressed string or a list of run lengths)"
    return f"must be {MASK_FORMS}"


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


def boundary(value, width: int, height: int, dilation: float = BOUNDARY_DILATION) -> dict:
    """The mask's boundary region (Cheng et al. 2021): its pixels within d = dilation x the image diagonal of its
    contour, as a run-length encoding (the library's routine)."""
    from faster_coco_eval.core import mask

    return mask.rleToBoundary(encoded(value, width, height), dilation)


def boundary_iou(found: list, truth: list, width: int, height: int,
                 dilation: float = BOUNDARY_DILATION) -> np.ndarray:
    """Boundary IoU (Cheng et al. 2021) of every mask in `found` (rows) against every mask in `truth` (columns): the
    IoU of their boundary regions, which tells a mask outlined badly from one placed badly (mask IoU barely sees a
    ragged outline on a large object)."""
    from faster_coco_eval.core import mask

    if not found or not truth:
        return np.zeros((len(found), len(truth)))
    overlap = mask.iou([boundary(v, width, height, dilation) for v in found],
                       [boundary(v, width, height, dilation) for v in truth], [0] * len(truth))
    return np.asarray(overlap, dtype=np.float64).reshape(len(found), len(truth))


def paired_boundary_ious(found: list, truth: list, image_ids: list[int], sizes: dict[int, tuple[int, int]],
                         dilation: float = BOUNDARY_DILATION) -> np.ndarray:
    """The Boundary IoU of each pair (found[k], truth[k]) of masks on image image_ids[k] (sizes: image id -> (width,
    height)): every boundary region computed at once by the library, on up to four threads."""
    import os

    from faster_coco_eval.core import mask

    if not found:
        return np.zeros(0)
    records = [{"id": k, "image_id": image, "segmentation": value}
               for k, (value, image) in enumerate(zip([*found, *truth], [*image_ids, *image_ids]))]
    heights_widths = {image: (height, width) for image, (width, height) in sizes.items()}
    mask.calculateRleForAllAnnotations(records, heights_widths, True, True, dilation, min(os.cpu_count() or 1, 4))
    n = len(found)
    return np.array([float(np.asarray(mask.iou([records[k]["boundary"]], [records[n + k]["boundary"]], [0]))
                           .reshape(-1)[0]) for k in range(n)])


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
    import json

    from faster_coco_eval.core import mask

    rle = json.loads(text)
    return mask.decode({"size": rle["size"], "counts": rle["counts"].encode()}).astype(bool)


def stored_boxes(texts: list[str]) -> np.ndarray:
    """The boxes (x, y, width, height; whole pixels) of stored masks (stored()), read from their run-length
    encodings by the library, without decoding their pixels."""
    import json

    from faster_coco_eval.core import mask

    if not texts:
        return np.zeros((0, 4))
    rles = [json.loads(text) for text in texts]
    return np.asarray(mask.toBbox([{"size": r["size"], "counts": r["counts"].encode()} for r in rles]),
                      dtype=np.float64).reshape(len(texts), 4)


def run_lengths(texts: list[str]) -> list[tuple[int, np.ndarray]]:
    """Stored masks (stored()) as (image height, run lengths) in column-major order, the first run of 0s, decoded
    from their compressed encodings by the library at once."""
    import json

    from faster_coco_eval import mask_api_new_cpp

    rles = [json.loads(text) for text in texts]
    plain = mask_api_new_cpp.toUncompressedRLE([{"size": r["size"], "counts": r["counts"].encode()} for r in rles])
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
