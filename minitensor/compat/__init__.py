"""minitensor.compat: run a PyTorch program on minitensor, its source unchanged.

    python -m minitensor.compat run script.py [args]     # the script runs as __main__, sys.argv = [script, args]

    with minitensor.compat.as_torch():
        import my_model                                   # its `import torch` is minitensor

`torch` and its submodules (names.TORCH_MODULES: torch.nn, torch.nn.functional, torch.optim, torch.utils.data,
torch.cuda, torch.amp, torch.backends, torch.autograd, ...) become module objects over minitensor's (proxy.py). What
minitensor lacks raises one error, NotInMinitensor (MissingAttribute, an AttributeError; MissingModule, a
ModuleNotFoundError), naming the torch API and the program's file and line. as_torch restores sys.modules on exit
(importer.py says how), so real torch and minitensor serve one process; load_file imports a file under a module name
of its own with torch mapped, as `python -m parity compare` does.
"""

from .importer import as_torch, import_file, load_file
from .proxy import MissingAttribute, MissingModule, NotInMinitensor, TorchModule
from .runner import run

__all__ = [
    "MissingAttribute",
    "MissingModule",
    "NotInMinitensor",
    "TorchModule",
    "as_torch",
    "import_file",
    "load_file",
    "run",
]
