"""Grad mode, per thread as in PyTorch: is_grad_enabled, set_grad_enabled, no_grad, enable_grad.

Each thread has its own switch and starts with grad mode on (PyTorch's rule). `Function.apply` reads it on every
op: one attribute of a `threading.local` (`state.enabled`). The helpers behave as torch's: context managers that
restore the previous mode on exit, `set_grad_enabled(mode)` also switching when simply called, and decorators
(`@no_grad()` or `@no_grad`) that on a generator function hold the mode only while the generator's own code runs.
"""

from __future__ import annotations

import functools
import inspect
import threading


class _ThreadGradMode(threading.local):
    enabled = True  # a class attribute: what every thread sees until it sets its own


state = _ThreadGradMode()  # this thread's switch: Function.apply reads `state.enabled` on every op


def is_grad_enabled() -> bool:
    """Whether this thread records graphs."""
    return state.enabled


def _set(mode: bool) -> None:
    if not isinstance(mode, bool):  # torch: "argument 'enabled' must be bool, not int"
        raise TypeError(f"set_grad_enabled: mode must be a bool (True or False), got {type(mode).__name__}")
    state.enabled = mode


class _DecoratorContextManager:
    """A grad-mode context manager that also decorates functions (and generator functions)."""

    def clone(self):
        return type(self)()

    def __call__(self, fn):
        if not callable(fn):
            raise TypeError(f"{type(self).__name__}() decorates a function, got {type(fn).__name__}")
        factory = self.clone  # a fresh manager per call: each saves its own previous mode
        if inspect.isgeneratorfunction(fn):
            return _wrap_generator(factory, fn)

        @functools.wraps(fn)
        def decorated(*args, **kwargs):
            with factory():
                return fn(*args, **kwargs)

        return decorated


class _NoParamDecoratorContextManager(_DecoratorContextManager):
    """Also usable without parentheses: `@no_grad` as `@no_grad()` (torch accepts both)."""

    def __new__(cls, orig_func=None):
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)


class _Block(_NoParamDecoratorContextManager):
    """Grad mode `mode` for a block (or a decorated function), then the mode it found."""

    mode = False

    def __init__(self, orig_func=None):
        self.prev = self.mode

    def __enter__(self):
        self.prev, state.enabled = state.enabled, self.mode

    def __exit__(self, *exc):
        state.enabled = self.prev
        return False


class no_grad(_Block):
    """Disable graph recording in this thread: `with mt.no_grad(): ...`, `@mt.no_grad()` or `@mt.no_grad`."""

    mode = False


class enable_grad(_Block):
    """Re-enable graph recording in this thread, inside a no_grad block."""

    mode = True


class set_grad_enabled(_DecoratorContextManager):
    """Set grad mode in this thread: `mt.set_grad_enabled(False)` switches it now (as a plain call);
    `with mt.set_grad_enabled(mode):` restores the mode it found when the block ends."""

    def __init__(self, mode: bool):
        self.prev = state.enabled
        _set(mode)
        self.mode = mode

    def __call__(self, fn):
        state.enabled = self.prev  # as a decorator, the constructor's switch must not stay (torch's rule)
        return super().__call__(fn)

    def __enter__(self):
        state.enabled = self.mode

    def __exit__(self, *exc):
        state.enabled = self.prev
        return False

    def clone(self):
        return type(self)(self.mode)

    def __repr__(self):
        return f"set_grad_enabled(mode={self.mode})"


def _wrap_generator(factory, fn):
    """Generator function fn, each step of its generator under a fresh factory(): the caller's mode at each yield."""

    @functools.wraps(fn)
    def generator_context(*args, **kwargs):
        gen = fn(*args, **kwargs)
        try:
            with factory():
                response = gen.send(None)
            while True:
                try:
                    request = yield response
                except GeneratorExit:
                    with factory():
                        gen.close()
                    raise
                except BaseException as e:
                    with factory():
                        response = gen.throw(e)
                else:
                    with factory():
                        response = gen.send(request)
        except StopIteration as e:
            return e.value

    return generator_context
