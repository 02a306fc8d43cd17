"""The torch.* functions, by family: each module's `__all__` names its public spellings, and this
package's `__all__` (what `minitensor` exports) is their union, so adding a function touches its module only.

    elementwise.py   add sub mul div pow neg exp log sqrt abs tanh erf sigmoid relu clamp maximum minimum
                     where masked_fill; equal allclose numel is_tensor
    reductions.py    sum mean var std max min amax amin argmax argmin logsumexp all any norm softmax log_softmax
    shape.py         reshape flatten unflatten permute transpose expand repeat squeeze unsqueeze cat stack split
                     chunk tril triu
    indexing.py      gather index_select sort argsort topk
    linalg.py        matmul mm bmm einsum
    sampling.py      multinomial
"""

from . import elementwise, indexing, linalg, reductions, sampling, shape
from .elementwise import *  # noqa: F403
from .indexing import *  # noqa: F403
from .linalg import *  # noqa: F403
from .reductions import *  # noqa: F403
from .sampling import *  # noqa: F403
from .shape import *  # noqa: F403

__all__ = [
    *elementwise.__all__,
    *reductions.__all__,
    *shape.__all__,
    *indexing.__all__,
    *linalg.__all__,
    *sampling.__all__,
]
