"""Count training steps from the optimizer, for scripts the user does not change.

Like torch_npu's ``dynamic_profile`` with ``PROF_CONFIG_PATH`` (its ``_NonIntrusiveProfile``),
a step ends when the **last constructed** optimizer's ``step()`` returns; steps of other
optimizers (e.g. a discriminator's, or a throw-away optimizer built earlier) are not counted.
As torch_npu does, ``Optimizer._patch_step_function`` (called by every ``Optimizer.__init__``)
is wrapped to note the construction order and to wrap the optimizer class's ``step`` once more,
*outside* torch's own ``record_function("Optimizer.step#...")``: the step boundary (which may
stop one profiler session and start the next) must not run inside a profiled range. (torch's
global ``register_optimizer_step_post_hook`` would call us inside that range.)

This module imports torch; nothing imports it before torch is imported by the training script.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

_MARK = "_rankscope_step_hooked"


class OptimizerStepCounter:
    def __init__(self, on_first_optimizer: Callable[[], None], on_step: Callable[[], None]):
        self.on_first_optimizer = on_first_optimizer
        self.on_step = on_step
        self.last_id: int | None = None
        self.steps = 0

    def install(self) -> None:
        from torch.optim.optimizer import Optimizer

        original = Optimizer._patch_step_function
        counter = self

        def _patch_step_function(opt: Any) -> None:
            original(opt)  # torch wraps the class's step with its record_function (once per class)
            cls = opt.__class__
            if not getattr(cls.step, _MARK, False):
                cls.step = counter._wrap(cls.step)
            first = counter.last_id is None
            counter.last_id = id(opt)
            if first:
                counter.on_first_optimizer()

        _patch_step_function.__wrapped__ = original  # type: ignore[attr-defined]
        Optimizer._patch_step_function = _patch_step_function  # type: ignore[method-assign]

    def _wrap(self, step: Callable[..., Any]) -> Callable[..., Any]:
        counter = self

        @functools.wraps(step)  # keeps torch's `hooked` mark, so torch does not wrap it again
        def step_then_count(opt: Any, *args: Any, **kwargs: Any) -> Any:
            out = step(opt, *args, **kwargs)
            if id(opt) == counter.last_id:
                counter.steps += 1
                counter.on_step()
            return out

        setattr(step_then_count, _MARK, True)
        return step_then_count


class _HookedLoader(importlib.abc.Loader):
    def __init__(self, loader: Any, callback: Callable[[ModuleType], None]):
        self.loader = loader
        self.callback = callback

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        self.callback(module)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Runs ``callback(module)`` right after module ``name`` finished importing."""

    def __init__(self, name: str, callback: Callable[[ModuleType], None]):
        self.name = name
        self.callback = callback
        self._busy = False

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name or self._busy:
            return None
        self._busy = True
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec

        def done(module: ModuleType) -> None:
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            self.callback(module)

        spec.loader = _HookedLoader(spec.loader, done)
        return spec


def when_imported(name: str, callback: Callable[[ModuleType], None]) -> None:
    """Call ``callback(module)`` once ``name`` is imported (at once if it already is)."""
    mod = sys.modules.get(name)
    if mod is not None:
        callback(mod)
        return
    sys.meta_path.insert(0, _PostImportFinder(name, callback))
