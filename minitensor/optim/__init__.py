"""minitensor.optim: optimizers updating parameters in place in NumPy, and lr schedulers.

`mt.optim.SGD`, `mt.optim.Adam`, `mt.optim.AdamW`, `mt.optim.Adagrad`, `mt.optim.RMSprop`, `mt.optim.Adadelta`,
`mt.optim.lr_scheduler.{LambdaLR, StepLR, WarmupInverseSqrt}`, with PyTorch's names, update formulas and
state_dict layout.
"""

from . import lr_scheduler
from .adam import Adam, AdamW
from .adaptive import Adadelta, Adagrad, RMSprop
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "Adadelta", "Adagrad", "RMSprop", "lr_scheduler"]
