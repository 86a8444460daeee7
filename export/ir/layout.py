"""Index arithmetic over flat row-major values, for the Gather nodes the front end builds."""

from __future__ import annotations

import numpy as np


def step_permutation(steps: int, width: int, parts: tuple[int, ...] = ()) -> np.ndarray:
    """Gather indices: with `parts`, interleave whole sequences laid one after the other (concatenation
    over the feature axis); without, reverse the order of the steps."""
    if not parts:
        return np.array([(steps - 1 - t) * width + u for t in range(steps) for u in range(width)])
    offsets = np.cumsum((0, *(steps * p for p in parts)))
    return np.array(
        [offsets[k] + t * p + u for t in range(steps) for k, p in enumerate(parts) for u in range(p)]
    )
