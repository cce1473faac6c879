"""rankscope collector: static and dynamic profiling windows in the training loop.

    from collector import Profiler
    prof = Profiler(config)      # dict, dataclass, tools.json / YAML path, or None (= $RANKSCOPE_PROFILER_OPTIONS)
    prof.start()
    for batch in loader:
        train_one_step(batch)
        prof.step(loss=loss.item())
    prof.stop()

Unmodified scripts: ``python -m collector run [options] -- python train.py``. The collector never
imports torch at import time (only its backends do, when a window starts) and never imports the
analyzer or the web app.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .callbacks import StepCallback, StopAtEpoch, StopAtStep
from .config import DynamicParam, ProfileOptions, ProfilerConfig, ScalarsParam, StaticParam
from .errors import BackendError, CollectorError, ConfigError
from .profiler import Profiler
from .sources import ENV_VAR, from_env, load_config, load_file

__all__ = [
    "Profiler",
    "ProfilerConfig",
    "ProfileOptions",
    "StaticParam",
    "DynamicParam",
    "ScalarsParam",
    "StepCallback",
    "StopAtStep",
    "StopAtEpoch",
    "CollectorError",
    "ConfigError",
    "BackendError",
    "ENV_VAR",
    "load_config",
    "load_file",
    "from_env",
    "hf_callback",
    "mindspore_callback",
]


def hf_callback(config: object = None, **kwargs: object) -> object:
    """A Hugging Face ``TrainerCallback`` running the collector (imports transformers only when called)."""
    from .hf import RankscopeTrainerCallback

    return RankscopeTrainerCallback(config, **kwargs)


def mindspore_callback(
    config: object = None, *, granularity: str = "step", start: int | None = None, stop: int | None = None
) -> object:
    """A MindSpore ``Model.train`` callback running the collector (imports MindSpore only when called);
    see :mod:`collector.mindspore_callback`."""
    from .mindspore_callback import callback

    return callback(config, granularity=granularity, start=start, stop=stop)
