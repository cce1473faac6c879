"""One validated configuration object for the collector, whatever the source.

The shape follows MindSpeed-MM's ``tools.json`` ``profile`` section (``enable``, ``profile_type``,
``ranks``, ``static_param``, ``dynamic_param``) with a few additions (``backend``, ``scalars`` and
the torch_npu experimental options). Every source (dict, dataclass, tools.json, mindformers YAML,
environment variable, see ``collector.sources``) ends up in :func:`ProfilerConfig.from_dict`, which
checks every key and value and reports all problems at once.

Step numbers are 0-based counts of completed ``prof.step()`` calls: the first step after
``start()`` is step 0, and ``start_step``/``end_step`` select the half-open range
``[start_step, end_step)`` (MindSpeed-MM's ``skip_first=start_step, active=end_step-start_step``).
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
from dataclasses import dataclass, field
from typing import Any

from .errors import ConfigError

LEVELS = ("level_none", "level0", "level1", "level2")
AIC_METRICS = (
    "AiCoreNone",
    "PipeUtilization",
    "ArithmeticUtilization",
    "Memory",
    "MemoryL0",
    "MemoryUB",
    "ResourceConflictRatio",
    "L2Cache",
    "MemoryAccess",
)
EXPORT_TYPES = ("text", "db")
PROFILE_TYPES = ("static", "dynamic")
BACKENDS = ("auto", "torch", "torch_npu", "mindspore")


@dataclass
class ProfileOptions:
    """What to record in a profiling window (shared by static windows and dynamic config files)."""

    level: str = "level0"  # torch_npu profiler_level: level_none | level0 | level1 | level2
    with_stack: bool = False  # Python/operator call stacks
    with_memory: bool = False  # tensor allocations (profile_memory)
    record_shapes: bool = False  # operator input shapes and dtypes
    with_cpu: bool = True  # host-side operators (ProfilerActivity.CPU)
    with_device: bool = True  # device activity: NPU (torch_npu) or CUDA (torch, when available)
    with_modules: bool = False  # module hierarchy
    with_flops: bool = False  # FLOP estimates of matmul/conv
    communication: bool = True  # collective operators (always recorded by both backends)
    data_simplification: bool = True  # torch_npu: drop intermediate files after parsing
    aic_metrics: str | None = None  # torch_npu AI Core PMU set; None = torch_npu's default for the level
    l2_cache: bool = False  # torch_npu L2 cache hit rates
    mstx: bool = False  # torch_npu mstx/msprof_tx user ranges
    export_type: list[str] = field(default_factory=lambda: ["text"])  # torch_npu: text and/or db
    analyse: bool = True  # torch_npu: parse raw data when the window ends (else offline: `python -m collector analyse`)
    async_mode: bool = False  # torch_npu: parse in a background process
    export_per_step: bool | None = None  # torch: one trace file per step (None = backend default)
    warmup: int = 0  # steps run with the profiler warming up before the first recorded step


OPTION_HELP: dict[str, str] = {
    "level": "collection level (torch_npu profiler_level): level_none, level0, level1, level2",
    "with_stack": "Python / operator call stacks",
    "with_memory": "tensor allocations and frees (profile_memory)",
    "record_shapes": "operator input shapes and dtypes",
    "with_cpu": "host-side operators (the CPU activity)",
    "with_device": "device activity: NPU with torch_npu, CUDA with torch when a GPU is present",
    "with_modules": "module hierarchy of operators",
    "with_flops": "FLOP estimates of matmul / convolution",
    "communication": "collective operators (recorded by both backends at every level)",
    "data_simplification": "torch_npu: drop intermediate files once parsed",
    "aic_metrics": "torch_npu AI Core PMU set (PipeUtilization, ArithmeticUtilization, Memory, ...); null = "
    "torch_npu's default for the level",
    "l2_cache": "torch_npu: L2 cache hit rates",
    "mstx": "torch_npu: mstx user ranges",
    "export_type": "torch_npu result format: text and/or db",
    "analyse": "torch_npu: parse raw data when the window ends (false: later, `python -m collector analyse`)",
    "async_mode": "torch_npu: parse in a background process",
    "export_per_step": "one output per step, final on disk as the step ends (null = backend default: true)",
    "warmup": "steps run with the profiler warming up before the first recorded step",
}


@dataclass
class StaticParam(ProfileOptions):
    """A fixed window: steps ``[start_step, end_step)`` written below ``save_path``."""

    save_path: str = "./rankscope_profile"
    start_step: int = 1
    end_step: int = 4


@dataclass
class DynamicParam:
    """A watched ``profiler_config.json`` in ``config_path``; edits start windows while training runs."""

    config_path: str = "./rankscope_dynamic"
    poll_interval_s: float = 1.0  # at most one stat() of the file per interval


@dataclass
class ScalarsParam:
    """Always-on step scalars (step wall time + values passed to ``prof.step()``)."""

    enable: bool = True
    collect_freq: int = 1  # write steps where step % collect_freq == 0 (and always the first one)


@dataclass
class ProfilerConfig:
    enable: bool = True
    profile_type: str = "static"
    ranks: list[int] = field(default_factory=lambda: [-1])  # -1 = every rank
    backend: str = "auto"  # auto | torch | torch_npu | mindspore
    static_param: StaticParam = field(default_factory=StaticParam)
    dynamic_param: DynamicParam = field(default_factory=DynamicParam)
    scalars: ScalarsParam = field(default_factory=ScalarsParam)
    # not options: where the values came from
    explicit: frozenset[str] = field(default_factory=frozenset, compare=False, repr=False)
    notices: list[str] = field(default_factory=list, compare=False, repr=False)
    source: str | None = field(default=None, compare=False, repr=False)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str | None = None) -> ProfilerConfig:
        """Build and validate; raises :class:`ConfigError` listing every problem."""
        problems: list[str] = []
        explicit: set[str] = set()
        cfg = cls(source=source)
        if not isinstance(data, dict):
            raise ConfigError([f"expected a mapping of options, got {type(data).__name__}"], source)
        data = dict(data)
        notices = data.pop("_notices", None)
        if isinstance(notices, list):
            cfg.notices.extend(str(n) for n in notices)
        _fill(cfg, data, "", problems, explicit, nested={"static_param", "dynamic_param", "scalars"})
        cfg.explicit = frozenset(explicit)
        problems.extend(cfg._check())
        if problems:
            raise ConfigError(problems, source)
        return cfg

    @classmethod
    def from_any(cls, obj: Any, source: str | None = None) -> ProfilerConfig:
        """A ProfilerConfig, dict, dataclass instance, or attribute object (e.g. a parsed namespace)."""
        if isinstance(obj, ProfilerConfig):
            return obj
        if isinstance(obj, dict):
            return cls.from_dict(obj, source)
        return cls.from_dict(_to_plain(obj), source or type(obj).__name__)

    # ------------------------------------------------------------------ views
    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able options (no provenance fields)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name in ("explicit", "notices", "source"):
                continue
            v = getattr(self, f.name)
            out[f.name] = dataclasses.asdict(v) if dataclasses.is_dataclass(v) else copy.deepcopy(v)
        return out

    def to_transport(self) -> dict[str, Any]:
        """as_dict() restricted to what the user set (so defaults stay defaults on the other side)."""
        full = self.as_dict()
        out: dict[str, Any] = {}
        for key in sorted(self.explicit):
            parts = key.split(".")
            src: Any = full
            for p in parts:
                src = src[p]
            dst = out
            for p in parts[:-1]:
                dst = dst.setdefault(p, {})
            dst[parts[-1]] = src
        if self.notices:
            out["_notices"] = list(self.notices)
        return out

    def profiles_rank(self, rank: int, ranks: list[int] | None = None) -> bool:
        sel = self.ranks if ranks is None else ranks
        return -1 in sel or rank in sel

    # ------------------------------------------------------------------ checks
    def _check(self) -> list[str]:
        p: list[str] = []
        if self.profile_type not in PROFILE_TYPES:
            p.append(f"profile_type: {self.profile_type!r} is not one of {', '.join(PROFILE_TYPES)}")
        if self.backend not in BACKENDS:
            p.append(f"backend: {self.backend!r} is not one of {', '.join(BACKENDS)}")
        p.extend(check_ranks(self.ranks, "ranks"))
        p.extend(check_options(self.static_param, "static_param"))
        sp = self.static_param
        if not sp.save_path:
            p.append("static_param.save_path: must not be empty")
        if sp.start_step < 0:
            p.append(f"static_param.start_step: {sp.start_step} is negative (steps count from 0)")
        if sp.end_step <= sp.start_step:
            p.append(
                f"static_param.end_step: {sp.end_step} must be greater than start_step {sp.start_step} "
                "(the window is [start_step, end_step))"
            )
        if sp.start_step >= 0 and sp.start_step - sp.warmup < 0:  # (a negative start_step is reported above)
            p.append(f"static_param.warmup: {sp.warmup} warm-up steps do not fit before start_step {sp.start_step}")
        if not self.dynamic_param.config_path:
            p.append("dynamic_param.config_path: must not be empty")
        if self.dynamic_param.poll_interval_s < 0:
            p.append(f"dynamic_param.poll_interval_s: {self.dynamic_param.poll_interval_s} is negative")
        if self.scalars.collect_freq < 1:
            p.append(f"scalars.collect_freq: {self.scalars.collect_freq} must be at least 1")
        return p


# ---------------------------------------------------------------------- helpers

_ALIASES = {
    "aic_metrics_type": "aic_metrics",  # MindSpeed-MM tools.json
    "profile_memory": "with_memory",  # torch / torch_npu / MindSpore name
    "profiler_level": "level",  # torch_npu / MindSpore name
    "record_shape": "record_shapes",  # MindSpore dynamic config name
}


def _to_plain(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {k: _to_plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_to_plain(v) for v in obj]
    if hasattr(obj, "__dict__") and not isinstance(obj, type):
        return {k: _to_plain(v) for k, v in vars(obj).items() if not k.startswith("_")}
    return obj


def _fill(
    target: Any, data: dict[str, Any], prefix: str, problems: list[str], explicit: set[str], nested: set[str]
) -> None:
    fields = {f.name: f for f in dataclasses.fields(target) if f.name not in ("explicit", "notices", "source")}
    for raw_key, value in data.items():
        key = _ALIASES.get(raw_key, raw_key)
        path = f"{prefix}{key}"
        if key not in fields:
            hint = difflib.get_close_matches(raw_key, list(fields), n=1)
            problems.append(f"{prefix}{raw_key}: unknown option" + (f" (did you mean {hint[0]}?)" if hint else ""))
            continue
        if key in nested:
            if value is None:
                continue
            if not isinstance(value, dict):
                value = _to_plain(value)
            if not isinstance(value, dict):
                problems.append(f"{path}: expected a mapping, got {type(value).__name__}")
                continue
            _fill(getattr(target, key), value, f"{path}.", problems, explicit, set())
            continue
        ok, conv, why = coerce(key, value, getattr(target, key))
        if not ok:
            problems.append(f"{path}: {why}")
            continue
        setattr(target, key, conv)
        explicit.add(path)


def coerce(key: str, value: Any, default: Any) -> tuple[bool, Any, str]:
    """Check and normalise one option value; returns (ok, value, why-not)."""
    if key == "level":
        lv = normalize_level(value)
        return (lv is not None, lv, f"{value!r} is not one of {', '.join(LEVELS)} (or 0/1/2)")
    if key == "aic_metrics":
        if value is None:
            return True, None, ""
        m = normalize_aic(value)
        return (m is not None, m, f"{value!r} is not one of {', '.join(AIC_METRICS)}")
    if key == "export_type":
        vals = [value] if isinstance(value, str) else value
        if not isinstance(vals, list) or not vals:
            return False, None, "expected 'text', 'db' or a non-empty list of them"
        low = [str(v).lower() for v in vals]
        bad = [v for v in low if v not in EXPORT_TYPES]
        if bad:
            return False, None, f"{bad[0]!r} is not one of {', '.join(EXPORT_TYPES)}"
        return True, sorted(set(low), key=EXPORT_TYPES.index), ""
    if key == "ranks":
        if isinstance(value, int) and not isinstance(value, bool):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            return False, None, f"expected a list of integer ranks (-1 = all), got {value!r}"
        return True, sorted(set(value)), ""
    if key == "export_per_step":
        if value is None or isinstance(value, bool):
            return True, value, ""
        return False, None, f"expected true, false or null, got {value!r}"
    if isinstance(default, bool):
        if isinstance(value, bool):
            return True, value, ""
        return False, None, f"expected true or false, got {value!r}"
    if isinstance(default, int):
        if isinstance(value, int) and not isinstance(value, bool):
            if key in ("warmup",) and value < 0:
                return False, None, f"{value} is negative"
            return True, value, ""
        return False, None, f"expected an integer, got {value!r}"
    if isinstance(default, float):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return True, float(value), ""
        return False, None, f"expected a number, got {value!r}"
    if isinstance(default, str):
        if isinstance(value, str):
            return True, value, ""
        if key.endswith("path") and hasattr(value, "__fspath__"):
            return True, str(value), ""
        return False, None, f"expected a string, got {value!r}"
    return True, value, ""


def normalize_level(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):  # (MindSpore's dynamic config: -1 = LevelNone)
        return f"level{value}" if value in (0, 1, 2) else "level_none" if value == -1 else None
    if not isinstance(value, str):
        return None
    v = value.strip().lower().replace("-", "_")
    if v in ("0", "1", "2"):
        v = f"level{v}"
    if v in ("none", "levelnone", "level_none"):
        return "level_none"
    return v if v in LEVELS else None


def normalize_aic(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    v = value.strip().lower().replace("_", "")
    for name in AIC_METRICS:
        if v == name.lower():
            return name
    return None


def check_ranks(ranks: list[int], key: str) -> list[str]:
    bad = [r for r in ranks if r < -1]
    if bad:
        return [f"{key}: {bad[0]} is not a rank (use -1 for all ranks)"]
    if not ranks:
        return [f"{key}: empty list profiles no rank (use [-1] for all ranks)"]
    return []


def check_options(opts: ProfileOptions, prefix: str) -> list[str]:
    p: list[str] = []
    if not (opts.with_cpu or opts.with_device):
        p.append(f"{prefix}.with_cpu: with_cpu and with_device are both false, nothing would be recorded")
    if opts.warmup < 0:
        p.append(f"{prefix}.warmup: {opts.warmup} is negative")
    return p


def option_names() -> list[str]:
    """Every profiling option (ProfileOptions field), in declaration order."""
    return [f.name for f in dataclasses.fields(ProfileOptions)]
