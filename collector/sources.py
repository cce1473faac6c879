"""Where a configuration can come from: dict, dataclass, tools.json, mindformers YAML, env variable.

All of them produce the same validated :class:`~collector.config.ProfilerConfig`:

- a Python dict or dataclass (the ``tools.json`` ``profile`` shape, see ``collector.config``);
- a ``tools.json``-style file (MindSpeed-MM): the ``profile`` section is used, other sections
  (``memory_profile``, ...) are left alone;
- a YAML file: either the same shape, or the mindformers keys (``profile``, ``profile_start_step``,
  ``profile_stop_step``, ``init_start_profile``, ``profile_communication``, ``profile_memory``,
  ``profile_output``, ``profiler_level``, ``profile_rank_ids``, ``with_stack``,
  ``data_simplification``, ``mstx``), flat at the top level or nested under ``profile:``;
- the environment variable ``RANKSCOPE_PROFILER_OPTIONS`` holding JSON (like MindSpore's
  ``MS_PROFILER_OPTIONS``), or a path to one of the files above.

mindformers counts steps from 1 and stops *after* ``profile_stop_step`` (its ProfileMonitor starts
at the beginning of ``profile_start_step`` and stops at the end of ``profile_stop_step``), so
``profile_start_step: 1, profile_stop_step: 10`` becomes ``start_step: 0, end_step: 10`` here.
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path
from typing import Any

from .config import ProfilerConfig
from .errors import ConfigError

ENV_VAR = "RANKSCOPE_PROFILER_OPTIONS"

_MINDSPEED_KEYS = {"enable", "profile_type", "ranks", "static_param", "dynamic_param", "scalars", "backend"}
_MINDFORMERS_KEYS = {
    "profile",
    "profile_on",
    "profile_start_step",
    "profile_stop_step",
    "init_start_profile",
    "profile_communication",
    "profile_memory",
    "profile_output",
    "profiler_level",
    "profile_rank_ids",
    "profile_pipeline",
    "with_stack",
    "data_simplification",
    "mstx",
}
_MINDFORMERS_ONLY = _MINDFORMERS_KEYS - {"profile", "profile_memory", "with_stack", "data_simplification", "mstx"}


def load_config(source: Any = None) -> ProfilerConfig:
    """Anything a user may hand to ``Profiler(...)``: config, dict, dataclass, path, or None (= env)."""
    if source is None:
        cfg = from_env()
        return cfg if cfg is not None else ProfilerConfig()
    if isinstance(source, (str, os.PathLike)):
        return load_file(source)
    return ProfilerConfig.from_any(source)


def load_file(path: str | os.PathLike[str]) -> ProfilerConfig:
    p = Path(path)
    name = str(p)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([f"cannot read the file: {exc.strerror or exc}"], name) from exc
    if p.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml

            data = yaml.safe_load(text)
        except Exception as exc:  # yaml.YAMLError and friends
            raise ConfigError([f"not valid YAML: {exc}"], name) from exc
    else:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ConfigError([f"not valid JSON: {exc}"], name) from exc
    return from_mapping(data, name)


def from_mapping(data: Any, source: str | None = None) -> ProfilerConfig:
    """Recognise the shape of a parsed file (tools.json, ours, mindformers) and convert it."""
    if not isinstance(data, dict):
        raise ConfigError([f"expected a mapping at the top level, got {type(data).__name__}"], source)
    if not data:
        return ProfilerConfig.from_dict({}, source)
    prof = data.get("profile")
    if isinstance(prof, bool) or set(data) & _MINDFORMERS_ONLY:
        return from_mindformers(data, source)  # flat mindformers keys in a model YAML
    if isinstance(prof, dict):
        if set(prof) & (_MINDSPEED_KEYS - {"profile"}):
            return ProfilerConfig.from_dict(prof, source)  # tools.json: {"profile": {...}, "memory_profile": ...}
        if set(prof) & _MINDFORMERS_KEYS:
            outer = {"output_dir": data["output_dir"]} if "output_dir" in data else {}
            return from_mindformers({**outer, **prof}, source)  # newer mindformers: profile: {profile_on: ...}
    if set(data) & _MINDSPEED_KEYS:
        return ProfilerConfig.from_dict(data, source)
    raise ConfigError(
        [
            "no profiling options found (expected a tools.json 'profile' section, the collector's keys, or "
            "mindformers profile_* keys)"
        ],
        source,
    )


def from_mindformers(d: dict[str, Any], source: str | None = None) -> ProfilerConfig:
    """Translate mindformers profile keys into the collector's options."""
    problems: list[str] = []
    out: dict[str, Any] = {"profile_type": "static"}
    sp: dict[str, Any] = {}
    notices: list[str] = []
    enable = d.get("profile_on", d.get("profile", False))
    if not isinstance(enable, bool):
        problems.append(f"profile: expected true or false, got {enable!r}")
    else:
        out["enable"] = enable
    start = d.get("profile_start_step", 1)
    stop = d.get("profile_stop_step", 10)
    for key, v in (("profile_start_step", start), ("profile_stop_step", stop)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            problems.append(f"{key}: expected a step number >= 1 (mindformers counts from 1), got {v!r}")
    if not problems:
        sp["start_step"] = 0 if d.get("init_start_profile") is True else start - 1
        sp["end_step"] = stop
    if "profile_memory" in d:
        sp["with_memory"] = d["profile_memory"]
    if "profile_communication" in d:
        sp["communication"] = d["profile_communication"]
    if d.get("profiler_level") is not None:
        sp["level"] = d["profiler_level"]
    for key in ("with_stack", "data_simplification", "mstx"):
        if key in d:
            sp[key] = d[key]
    path = d.get("profile_output") or d.get("output_path")
    if path:
        sp["save_path"] = path
    elif d.get("output_dir"):
        sp["save_path"] = str(Path(d["output_dir"]) / "profile")
    ranks = d.get("profile_rank_ids")
    if ranks is not None:
        out["ranks"] = ranks
    notices.extend(_near_misses(d))
    if d.get("profile_pipeline"):
        notices.append(
            "profile_pipeline (mindformers) has no equivalent in torch.profiler or torch_npu.profiler; ignored"
        )
    if problems:
        raise ConfigError(problems, source)
    out["static_param"] = sp
    if notices:
        out["_notices"] = notices
    return ProfilerConfig.from_dict(out, source)


def _near_misses(d: dict[str, Any]) -> list[str]:
    """Notices for unknown keys that look like a misspelt mindformers profile key (``profile_memroy``).

    A model YAML holds many keys that are none of the collector's business, so only keys starting
    with ``profil`` or very close to a known key are reported, and as notices, not errors.
    """
    known = sorted(_MINDFORMERS_KEYS | {"output_dir", "output_path"})
    out = []
    for key in d:
        if not isinstance(key, str) or key in known:
            continue
        hint = difflib.get_close_matches(key, known, n=1, cutoff=0.6 if key.lower().startswith("profil") else 0.85)
        if hint:
            out.append(f"{key}: not a mindformers profiling key, ignored (did you mean {hint[0]}?)")
        elif key.lower().startswith("profil"):
            out.append(f"{key}: not a mindformers profiling key, ignored")
    return out


def from_env(var: str = ENV_VAR, environ: dict[str, str] | None = None) -> ProfilerConfig | None:
    """The config in ``$RANKSCOPE_PROFILER_OPTIONS`` (JSON, or a path to a config file); None if unset."""
    env = os.environ if environ is None else environ
    raw = env.get(var, "").strip()
    if not raw:
        return None
    if raw.startswith("{"):
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise ConfigError([f"not valid JSON: {exc}"], f"${var}") from exc
        return from_mapping(data, f"${var}")
    return load_file(raw)
