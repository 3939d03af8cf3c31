"""Level 3 of the slide reward: visual whitespace balance of a rendered slide (numpy on pixels).

The background is the slide's most common colour; a pixel is content when any channel differs
from it by more than `tol`. From that mask: the longest run of blank rows and of blank columns
(as a fraction of the slide: a big empty band), the share of blank cells in a 3x4 grid (empty
regions anywhere), and how far the content's centre of mass sits from the slide centre
(everything crammed into one corner). Each maps to a penalty through a linear ramp between a
tolerated and an unacceptable value; the thresholds are set so that an ordinary title slide or
text-and-picture slide loses nothing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

GRID = (3, 4)  # rows, cols of the blank-cell grid
BAND = (0.4, 0.75)  # longest blank row/column band: tolerated .. worst
BLANK = (0.5, 0.9)  # share of blank grid cells
OFFSET = (0.25, 0.45)  # centre of mass distance from the centre (per axis, fraction of size)
WEIGHTS = {"band": 0.4, "blank": 0.3, "offset": 0.3}


@dataclass
class Whitespace:
    band_rows: float
    band_cols: float
    blank_cells: float
    offset: float
    score: float

    def to_dict(self) -> dict[str, float]:
        return {k: round(v, 4) for k, v in asdict(self).items()}


def _ramp(x: float, lo_hi: tuple[float, float]) -> float:
    lo, hi = lo_hi
    return float(np.clip((x - lo) / (hi - lo), 0.0, 1.0))


def _longest_run(blank: np.ndarray) -> int:
    """Length of the longest run of True in a 1-D bool array."""
    best = run = 0
    for b in blank:
        run = run + 1 if b else 0
        best = max(best, run)
    return best


def content_mask(image: np.ndarray, tol: int = 24) -> np.ndarray:
    """(H, W) bool: pixels that differ from the dominant (background) colour."""
    px = image.reshape(-1, 3).astype(np.int32)  # (H*W, 3)
    quant = (px >> 4) @ np.array([256, 16, 1])  # (H*W,) 4-bit-per-channel colour id
    bg_id = np.bincount(quant).argmax()
    bg = px[quant == bg_id].mean(axis=0)  # (3,)
    diff = np.abs(px - bg).max(axis=1)  # (H*W,)
    return (diff > tol).reshape(image.shape[:2])


def whitespace(image: np.ndarray) -> Whitespace:
    """Measure the whitespace balance of one slide image (H, W, 3) uint8."""
    mask = content_mask(image)  # (H, W)
    h, w = mask.shape
    if not mask.any():
        return Whitespace(1.0, 1.0, 1.0, 0.5, 0.0)
    band_rows = _longest_run(~mask.any(axis=1)) / h
    band_cols = _longest_run(~mask.any(axis=0)) / w
    gr, gc = GRID
    cells = [
        mask[i * h // gr : (i + 1) * h // gr, j * w // gc : (j + 1) * w // gc].mean()
        for i in range(gr)
        for j in range(gc)
    ]
    blank = float(np.mean([c < 0.005 for c in cells]))
    ys, xs = np.nonzero(mask)
    offset = max(abs(xs.mean() / w - 0.5), abs(ys.mean() / h - 0.5))
    penalty = (
        WEIGHTS["band"] * _ramp(max(band_rows, band_cols), BAND)
        + WEIGHTS["blank"] * _ramp(blank, BLANK)
        + WEIGHTS["offset"] * _ramp(offset, OFFSET)
    )
    return Whitespace(band_rows, band_cols, blank, float(offset), 1.0 - penalty)
