"""Speed devices of the selections with a zero branch: a product by the boolean mask instead of np.where.

np.where on a random mask is several times slower than a product by the mask ([029]). Both devices take the
product where it gives np.where's values, and hand back to the formula elsewhere:
  - a non-finite product (0 * inf and 0 * NaN give NaN where np.where gives 0): the formula;
  - off the host: the formula (the finiteness test would wait on the device, a host sync per call).
A zero selected from a negative value is -0.0 where the formula gives 0.0: equal values, as every comparison and
every later sum sees them.

[029]: docs/decisions/029-selection-by-mask-product.md
"""

from __future__ import annotations

import numpy as np

from ..devices import is_host
from ..ops.namespace import zero_where
from ..ops.selection import select
from . import device

EVIDENCE = "docs/decisions/029-selection-by-mask-product.md"


def select_by_product(cond, a, b):
    """np.where(cond, a, b) for a 0-d zero branch (as a backward on Tensors writes it: where(cond, g, 0)): the other
    branch times the mask."""
    if getattr(cond, "dtype", None) != np.bool_ or a.dtype != b.dtype:
        return select(cond, a, b)
    if is_host(b) and a.ndim == 0 and not a:
        out = b * ~cond  # where(cond, 0, b)
    elif is_host(a) and b.ndim == 0 and not b:
        out = a * cond  # where(cond, a, 0)
    else:
        return select(cond, a, b)
    return out if np.isfinite(out).all() else select(cond, a, b)


def zero_where_by_product(drop, g):
    """np.where(drop, 0, g) as g * ~drop (relu's backward on arrays)."""
    if not is_host(g):
        return zero_where(drop, g)
    out = g * ~drop
    return out if np.isfinite(out).all() else zero_where(drop, g)


device("select", select_by_product, evidence=EVIDENCE)
device("zero_where", zero_where_by_product, evidence=EVIDENCE)
