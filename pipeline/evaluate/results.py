"""The evaluation's results as written to ``eval_results.json``."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

FLOAT_DIGITS = 12


def clean(value: Any) -> Any:
    """JSON-ready copy: floats rounded to 12 digits, NaN/inf -> null, numpy scalars -> Python."""
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        number = float(value)
        return None if not math.isfinite(number) else round(number, FLOAT_DIGITS) + 0.0
    return value
