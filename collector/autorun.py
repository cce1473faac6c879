"""The unmodified-script route: profile a training script from ``$RANKSCOPE_PROFILER_OPTIONS``.

``python -m collector run -- python train.py`` puts ``collector/_bootstrap`` on ``PYTHONPATH``;
its ``sitecustomize`` calls :func:`install_from_env` in every Python process of the job (but
torchrun's launcher, see :func:`is_launcher`). Nothing
happens until torch is imported; then the collector counts steps from the optimizer (see
``collector.optimizer_hook``): counting starts when the first optimizer is built (step 0), each
``step()`` of the last-built optimizer is a step boundary, and the collector stops at exit.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType

from .errors import CollectorError
from .sources import ENV_VAR, from_env

_installed: object | None = None


def install_from_env() -> object | None:
    """Arm the collector if ``$RANKSCOPE_PROFILER_OPTIONS`` is set; never raises into the user's program."""
    global _installed
    if _installed is not None:
        return _installed
    try:
        cfg = from_env()
    except CollectorError as exc:
        sys.stderr.write(f"rankscope collector: ${ENV_VAR} rejected, profiling disabled: {exc}\n")
        return None
    if cfg is None or not cfg.enable or is_launcher():
        return None
    from .profiler import Profiler

    prof = Profiler(cfg)
    prof.automatic = True

    def on_torch(_mod: ModuleType) -> None:
        from .optimizer_hook import OptimizerStepCounter

        counter = OptimizerStepCounter(on_first_optimizer=prof.start, on_step=prof.step)
        counter.install()
        prof.step_counter = counter  # type: ignore[attr-defined]

    from .optimizer_hook import when_imported

    when_imported("torch", on_torch)
    _installed = prof
    return prof


_LAUNCHER_MODULES = ("torch.distributed.run", "torch.distributed.launch")


def is_launcher(argv: list[str] | None = None, orig_argv: list[str] | None = None) -> bool:
    """True in torchrun's own process (``torchrun ...``, ``python -m torch.distributed.run ...``).

    The launcher is not a rank: it trains nothing, so the collector stays out of it (no dynamic
    config generated or log lines written with an unknown rank). Its workers run the script.
    """
    argv = sys.argv if argv is None else argv
    orig = list(getattr(sys, "orig_argv", []) if orig_argv is None else orig_argv)
    if argv and os.path.basename(str(argv[0])).removesuffix(".exe") == "torchrun":
        return True
    return any(a == "-m" and b in _LAUNCHER_MODULES for a, b in zip(orig, orig[1:]))


def explicit_profiler_started(explicit: object) -> None:
    """The script started a Profiler of its own: the automatic one steps aside (one profiler at a time).

    Called by ``Profiler.start()`` of any non-automatic Profiler. The automatic collector stops
    counting steps, closes a window it may have opened (removing it when it captured nothing) and
    says so once on stderr; the script's Profiler then runs alone, with the config it was given.
    """
    auto = _installed
    if auto is None or auto is explicit or getattr(auto, "stepped_aside", True):
        return
    sys.stderr.write(
        "rankscope collector: the script starts its own collector.Profiler; the automatic collector of "
        "`python -m collector run` steps aside (it records no window and counts no steps in this process)\n"
    )
    auto.step_aside("the script started its own collector.Profiler; the automatic collector stepped aside")  # type: ignore[attr-defined]
