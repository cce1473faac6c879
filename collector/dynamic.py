"""Dynamic profiling: a watched ``profiler_config.json`` starts windows while training runs.

The folder ``dynamic_param.config_path`` holds the file; an empty (or missing) folder gets a
generated one with profiling off. At a step boundary, at most once per ``poll_interval_s``, the
collector ``stat()``s the file; only when its size, mtime or inode changed is it read. A valid
edit takes effect at the next step boundary; an invalid one (bad JSON, unknown level, start in the
past, stop before start...) is rejected and training goes on with the previous settings. What
was read, started, stopped and rejected goes to ``rankscope_dynamic.log`` beside the file (one
line per event, every rank appends to the same file).

Keys (our names; torch_npu's ``dynamic_profile`` and MindSpore's names are accepted too):

- ``start_step``: 0 = off, -1 = the next step, N = at step N (steps count from 0, as ``prof.step()``
  calls), with ``active``: number of steps to record (default 1); torch_npu's convention.
- or MindSpore's (``DynamicProfilerMonitor``), used whenever the file has ``stop_step``: steps
  ``start_step..stop_step``, both inclusive, ``-1``/``-1`` = off. MindSpore's monitor, called after
  each step as ``prof.step()`` is, records exactly those step numbers (its ``{"start_step": 10,
  "stop_step": 10}`` is one step, step 10); the log says which meaning was applied.
- ``warmup``: warm-up steps before ``start_step``; ``ranks``: list, -1 = all (torch_npu: ``is_rank``
  + ``rank_list``); ``save_path`` (torch_npu ``prof_dir``, MindSpore ``prof_path``).
- every profiling option of ``static_param`` (``level``, ``with_stack``, ``with_memory``...); torch_npu's
  ``activities`` and ``experimental_config`` are understood. Options not given keep the values of
  the collector's config.

While a window is running the file is not re-read; an edit made then is read when the window ends.

Outside the job (``analyze serve --control``): :func:`write_config` writes an edit the way the
watcher wants it (validated by :func:`parse_request` first, then replaced atomically), and
:func:`read_log` / :func:`rank_states` read the log back: which rank watches the file, which is
armed for a window, which is recording one.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
import socket
import time
from pathlib import Path
from typing import Any

from .config import ProfileOptions, check_options, check_ranks, coerce, option_names
from .window import WindowPlan, described_selects

CONFIG_NAME = "profiler_config.json"
LOG_NAME = "rankscope_dynamic.log"

_HELP = (
    "start_step: 0 = off, -1 = the next step, N = at step N (steps count from 0); active: steps to record "
    "(or MindSpore's stop_step: start_step..stop_step, both inclusive); the other values are the collector's "
    "config (change one to override it for the next window); edits take effect at the next step boundary; "
    "see rankscope_dynamic.log"
)


def generated_file(options: ProfileOptions, ranks: list[int], save_path: str | None) -> dict[str, Any]:
    """The ``profiler_config.json`` written into an empty folder: profiling off, the effective config's values.

    Values equal to the collector's config do not count as given when the file is read (see
    :meth:`DynamicWatcher._read`), so the spelled-out values neither override the config nor
    trigger "cannot honour" reports.
    """
    # save_path stays null (= the collector's save_path of whichever run reads the file): a file kept
    # for a later run must not send that run's output into this run's folder
    out: dict[str, Any] = {
        "start_step": 0,
        "active": 1,
        "warmup": options.warmup,
        "ranks": list(ranks),
        "save_path": None,
    }
    for name in option_names():
        if name != "warmup":
            v = getattr(options, name)
            out[name] = list(v) if isinstance(v, list) else v
    out["_help"] = _HELP + (f" (save_path null = {save_path})" if save_path else "")
    return out


DEFAULT_FILE: dict[str, Any] = generated_file(ProfileOptions(), [-1], None)  # with the built-in defaults

# MindSpore's dynamic config also takes ints: activities 0 = CPU+NPU, 1 = CPU, 2 = NPU; export_type 0/1/2
_MS_ACTIVITIES = {0: ["CPU", "NPU"], 1: ["CPU"], 2: ["NPU"]}
_MS_EXPORT_TYPES = {0: ["text"], 1: ["db"], 2: ["text", "db"]}
_OWN_KEYS = {"start_step", "active", "stop_step", "warmup", "ranks", "save_path"}
_ALIASES = {
    "prof_dir": "save_path",  # torch_npu
    "prof_path": "save_path",  # MindSpore
    "profile_memory": "with_memory",
    "record_shape": "record_shapes",  # MindSpore
    "profiler_level": "level",  # MindSpore top level / torch_npu experimental_config
    "msprof_tx": "mstx",
}
# torch_npu / MindSpore keys the collector has no use for: reported in the log, not rejected
_FOREIGN = {
    "is_valid",
    "metadata",
    "op_attr",
    "gc_detect_threshold",
    "record_op_args",
    "mstx_domain_include",
    "mstx_domain_exclude",
    "host_sys",
    "sys_io",
    "sys_interconnection",
    "analyse_mode",
    "parallel_strategy",
    "hbm_ddr",
    "pcie",
    "data_process",
    "sync_enable",
}


class DynamicRequest:
    """A parsed, validated config file: either 'off' or the parameters of one window."""

    def __init__(
        self,
        start_step: int,
        active: int | None,
        stop_step: int | None,
        warmup: int,
        ranks: list[int] | None,
        save_path: str | None,
        options: dict[str, Any],
        ignored: list[str],
        meaning: str = "torch_npu",
    ):
        self.start_step = start_step
        self.active = active
        self.stop_step = stop_step
        self.warmup = warmup
        self.ranks = ranks
        self.save_path = save_path
        self.options = options
        self.ignored = ignored
        self.meaning = meaning  # torch_npu (start_step + active) | mindspore (start_step..stop_step inclusive)

    @property
    def off(self) -> bool:
        if self.meaning == "mindspore":
            return self.start_step == -1 and self.stop_step == -1
        return self.start_step == 0

    @property
    def described(self) -> str:
        """Which meaning the file's steps were read with (for the maintenance log)."""
        if self.meaning == "mindspore":
            return (
                f"MindSpore's meaning (stop_step given): start_step {self.start_step}..stop_step {self.stop_step}, "
                "both inclusive"
            )
        return f"torch_npu's meaning: start_step {self.start_step}, active {self.active or 1}"


def parse_request(data: Any) -> tuple[DynamicRequest | None, list[str]]:
    """Validate a parsed profiler_config.json; returns (request, problems)."""
    if not isinstance(data, dict):
        return None, [f"expected a JSON object, got {type(data).__name__}"]
    flat: dict[str, Any] = {}
    problems: list[str] = []
    ignored: list[str] = []
    for k, v in data.items():
        if k == "experimental_config":
            if isinstance(v, dict):
                for ek, ev in v.items():
                    flat.setdefault(_ALIASES.get(ek, ek), ev)
            elif v is not None:
                problems.append("experimental_config: expected an object")
            continue
        if k == "activities" and isinstance(v, int) and not isinstance(v, bool) and v in _MS_ACTIVITIES:
            v = _MS_ACTIVITIES[v]  # MindSpore's int form
        if k == "export_type" and isinstance(v, int) and not isinstance(v, bool) and v in _MS_EXPORT_TYPES:
            v = _MS_EXPORT_TYPES[v]
        if k == "activities":
            if not isinstance(v, list) or not all(isinstance(a, str) for a in v):
                problems.append(f'activities: expected a list like ["CPU", "NPU"], got {v!r}')
                continue
            names = {a.upper() for a in v}
            flat["with_cpu"] = "CPU" in names
            flat["with_device"] = bool(names & {"NPU", "CUDA", "GPU"})
            continue
        flat[_ALIASES.get(k, k)] = v
    if "is_rank" in flat or "rank_list" in flat:  # torch_npu: is_rank + rank_list
        is_rank = flat.pop("is_rank", False)
        rank_list = flat.pop("rank_list", [])
        if is_rank is True:
            flat.setdefault("ranks", rank_list)
    names = set(option_names())
    opts: dict[str, Any] = {}
    for k, v in flat.items():
        if k.startswith("_") or k in _OWN_KEYS:
            continue
        if k in _FOREIGN:
            ignored.append(k)
            continue
        if k not in names:
            hint = difflib.get_close_matches(k, sorted(names | _OWN_KEYS), n=1)
            ignored.append(k + (f" (did you mean {hint[0]}?)" if hint else ""))
            continue
        ok, conv, why = coerce(k, v, getattr(ProfileOptions, k, None) if k != "export_type" else ["text"])
        if not ok:
            problems.append(f"{k}: {why}")
        else:
            opts[k] = conv

    def integer(key: str, default: int | None) -> int | None:
        v = flat.get(key, default)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int):
            problems.append(f"{key}: expected an integer, got {v!r}")
            return None
        return v

    start = integer("start_step", 0)
    active = integer("active", None)
    stop = integer("stop_step", None)
    warmup = integer("warmup", 0)
    ranks = flat.get("ranks")
    if ranks is not None:
        ok, ranks, why = coerce("ranks", ranks, [-1])
        if not ok:
            problems.append(f"ranks: {why}")
        else:
            problems.extend(check_ranks(ranks, "ranks"))
    save_path = flat.get("save_path")
    if save_path is not None and (not isinstance(save_path, str) or not save_path):
        problems.append(f"save_path: expected a folder path, got {save_path!r}")
    # stop_step is MindSpore's key (DynamicProfilerMonitor): start_step..stop_step, both inclusive, -1/-1 = off;
    # without it, torch_npu's start_step (0 = off, -1 = the next step) + active
    meaning = "mindspore" if stop is not None else "torch_npu"
    if meaning == "torch_npu":
        if start is not None and start < -1:
            problems.append(f"start_step: {start} is not valid (0 = off, -1 = next step, N = at step N)")
    elif start is not None:
        if (start, stop) == (-1, -1):
            pass  # MindSpore's default file: profiling off
        elif start < 0 or stop < 0:
            problems.append(
                f"start_step {start}, stop_step {stop}: with stop_step (MindSpore's meaning) both must be steps >= 0 "
                "(or both -1: off)"
            )
        elif stop < start:
            problems.append(
                f"stop_step: {stop} is before start_step {start} (MindSpore's window start_step..stop_step "
                "includes both ends)"
            )
        elif active is not None and stop - start + 1 != active:
            problems.append(
                f"active ({active}) and stop_step ({stop}) disagree for start_step {start} (start_step..stop_step "
                f"includes both ends: {stop - start + 1} steps); give one of them"
            )
    if active is not None and active < 1:
        problems.append(f"active: {active} steps records nothing (must be at least 1)")
    if warmup is not None and warmup < 0:
        problems.append(f"warmup: {warmup} is negative")
    merged = dataclasses.replace(ProfileOptions(), **opts)
    problems.extend(p.replace("dynamic.", "") for p in check_options(merged, "dynamic"))
    if problems:
        return None, problems
    assert start is not None and warmup is not None
    return DynamicRequest(start, active, stop, warmup, ranks, save_path, opts, ignored, meaning), []


def config_location(config_path: str | os.PathLike[str]) -> tuple[Path, Path]:
    """(watched folder, config file) for ``dynamic_param.config_path``.

    A folder (existing or not) holds ``profiler_config.json``; an existing file, or a path ending in
    ``.json`` that is not a folder (MindSpeed-MM allows pointing at the file itself), is the config
    file and its folder is the watched folder.
    """
    p = Path(config_path)
    if p.is_file() or (p.suffix.lower() == ".json" and not p.is_dir()):
        return p.parent, p
    return p, p / CONFIG_NAME


class DynamicWatcher:
    """Polls the config file at step boundaries and turns valid edits into window plans."""

    def __init__(
        self,
        config_path: str | os.PathLike[str],
        poll_interval_s: float,
        base_options: ProfileOptions,
        base_explicit: frozenset[str],
        save_path: str,
        ranks: list[int],
        rank: Any = None,
        clock: Any = time.monotonic,
    ):
        self.folder, self.path = config_location(config_path)
        self.log_path = self.folder / LOG_NAME
        self.interval = float(poll_interval_s)
        self.base_options = base_options
        self.base_explicit = base_explicit
        self.save_path = save_path
        self.ranks = ranks
        self.rank = rank or (lambda: None)  # callable giving the rank for log lines
        self.clock = clock
        self._next_check = 0.0
        self._seen: tuple[int, int, int] | None = None
        self._missing_logged = False
        self._busy_logged: tuple[int, int, int] | None = None
        self.last_request: DynamicRequest | None = None

    # -- log
    def log(self, message: str) -> None:
        r = self.rank()
        line = (
            f"{time.strftime('%Y-%m-%d %H:%M:%S')} host={socket.gethostname()} pid={os.getpid()} "
            f"rank={'?' if r is None else r} {message}\n"
        )
        try:
            fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.write(fd, line.encode("utf-8", "replace"))
            finally:
                os.close(fd)
        except OSError:
            pass

    # -- setup
    def init(self, next_step: int) -> WindowPlan | None:
        """Create the folder and a default file if needed, then read the file once."""
        self.folder.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():
            tmp = self.folder / f".{self.path.name}.{os.getpid()}.tmp"
            content = generated_file(self.base_options, self.ranks, self.save_path)
            tmp.write_text(json.dumps(content, indent=2) + "\n", encoding="utf-8")
            try:
                os.link(tmp, self.path)  # atomic, and fails if another rank was first
                self.log(f"generated {self.path.name} (profiling off: set start_step to start a window)")
            except FileExistsError:
                pass
            finally:
                tmp.unlink(missing_ok=True)
        self.log(f"watching {self.path} (checked at step boundaries, at most every {self.interval:g} s)")
        return self.poll(next_step, busy=False, force=True)

    # -- per step
    def poll(self, next_step: int, busy: bool, force: bool = False) -> WindowPlan | None:
        """Called at each step boundary; cheap unless the interval elapsed and the file changed."""
        if not force:
            now = self.clock()
            if now < self._next_check:
                return None
            self._next_check = now + self.interval
        try:
            st = os.stat(self.path)
        except OSError:
            if not self._missing_logged:
                self.log(f"{self.path.name} not found; keeping the previous settings")
                self._missing_logged = True
            return None
        self._missing_logged = False
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
        if key == self._seen:
            return None
        if busy:
            if self._busy_logged != key:
                self.log("config changed while a window is running; it will be read when the window ends")
                self._busy_logged = key
            return None
        self._seen = key
        return self._read(next_step)

    def _read(self, next_step: int) -> WindowPlan | None:
        try:
            text = self.path.read_text(encoding="utf-8")
        except OSError as exc:
            self.log(f"rejected: cannot read {self.path.name}: {exc}")
            return None
        try:
            data = json.loads(text)
        except ValueError as exc:
            self.log(f"rejected: {self.path.name} is not valid JSON ({exc}); keeping the previous settings")
            return None
        req, problems = parse_request(data)
        if req is None:
            self.log("rejected: " + "; ".join(problems) + "; keeping the previous settings")
            return None
        if req.ignored:
            self.log("ignored keys: " + ", ".join(req.ignored))
        if req.off:
            off = "start_step -1, stop_step -1 (MindSpore's meaning)" if req.meaning == "mindspore" else "start_step 0"
            self.log(f"read {self.path.name}: {off}, profiling off")
            self.last_request = req
            return None
        if req.start_step == -1:
            start = next_step + req.warmup
        else:
            start = req.start_step
            if start - req.warmup < next_step:
                first = "start_step" if not req.warmup else "start_step - warmup"
                self.log(
                    f"rejected: {first} ({start - req.warmup}) is in the past (the next step is {next_step}); "
                    "keeping the previous settings"
                )
                return None
        end = req.stop_step + 1 if req.meaning == "mindspore" else start + (req.active or 1)
        options = dataclasses.replace(self.base_options, **req.options, warmup=req.warmup)
        # only values that differ from the collector's config count as given (the generated file
        # spells out every value of the config: those must not look like the user's choices)
        changed = {k for k, v in req.options.items() if v != getattr(self.base_options, k)}
        plan = WindowPlan(
            start=start,
            end=end,
            options=options,
            save_path=req.save_path or self.save_path,
            trigger="dynamic",
            ranks=req.ranks if req.ranks is not None else list(self.ranks),
            origin=f"{self.path} (mtime_ns {self._seen[0] if self._seen else 0})",
            explicit=frozenset(self.base_explicit | changed),
        )
        self.last_request = req
        self.log(f"accepted: window {plan.describe()}, output below {plan.save_path} (read with {req.described})")
        return plan


# ---------------------------------------------------------------------------------------------
# outside the job: write an edit, read the log back
# ---------------------------------------------------------------------------------------------


def write_config(path: str | os.PathLike[str], data: dict[str, Any]) -> list[str]:
    """Write ``data`` as the watched ``profiler_config.json`` at ``path`` when :func:`parse_request`
    accepts it; returns its problems (nothing written) or []. The file is replaced atomically (a
    temporary file in the same folder, flushed, then renamed over it): the watcher reads either the
    old file or the new one, never half of one."""
    _, problems = parse_request(data)
    if problems:
        return problems
    target = Path(path)
    tmp = target.parent / f".{target.name}.{os.getpid()}.{time.monotonic_ns()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps(data, indent=2) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return []


LOG_LINE = re.compile(r"^(\S+ \S+) host=(\S*) pid=(\d+) rank=(\S+) (.*)$")


@dataclasses.dataclass(frozen=True)
class LogLine:
    """One line of ``rankscope_dynamic.log``."""

    time: str
    host: str
    pid: int
    rank: int | None
    message: str


def read_log(path: str | os.PathLike[str], max_bytes: int = 1 << 20) -> list[LogLine]:
    """The lines of a maintenance log (its last ``max_bytes``; a line that is not the collector's
    is kept as a message of no rank)."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - max_bytes))
            raw = f.read()
    except FileNotFoundError:
        return []
    lines = raw.decode("utf-8", "replace").splitlines()
    if len(raw) >= max_bytes and lines:
        lines = lines[1:]  # cut by the read
    out = []
    for line in lines:
        m = LOG_LINE.match(line)
        if m is None:
            if line.strip():
                out.append(LogLine("", "", 0, None, line))
            continue
        rank = int(m.group(4)) if m.group(4).isdigit() else None
        out.append(LogLine(m.group(1), m.group(2), int(m.group(3)), rank, m.group(5)))
    return out


@dataclasses.dataclass
class RankState:
    """What one collector process (host, pid) last said in the log."""

    rank: int | None
    host: str
    pid: int
    state: str  # watching | armed | not selected | recording | done | stopped
    window: str | None  # the window it concerns, as the collector described it
    since: str  # time of the line that set the state
    last: str  # its last line's message


_WINDOW_EVENTS = (  # (message prefix, state); the window description follows the prefix
    ("accepted: window ", "armed"),
    ("starting window ", "recording"),
    ("stopped window ", "done"),
)


def rank_states(lines: list[LogLine]) -> list[RankState]:
    """Per collector process of the log (by rank, the latest process of a rank first), its state: ``watching``
    the file with no window asked, ``armed`` (a window it will record was accepted), ``not
    selected`` (the accepted window is for other ranks), ``recording``, ``done`` (its window
    stopped: the status follows the description), ``stopped`` (the collector stopped: the job ended)."""
    states: dict[tuple[str, int], RankState] = {}
    for ln in lines:
        if ln.pid == 0:
            continue
        key = (ln.host, ln.pid)
        st = states.get(key)
        if st is None:
            st = states[key] = RankState(ln.rank, ln.host, ln.pid, "watching", None, ln.time, ln.message)
        st.last = ln.message
        if ln.rank is not None:
            st.rank = ln.rank
        msg = ln.message
        if msg == "collector stopped":
            st.state, st.since = "stopped", ln.time
            continue
        if msg.startswith("watching "):
            st.state, st.window, st.since = "watching", None, ln.time
            continue
        if msg.startswith("read ") and msg.endswith("profiling off"):
            if st.state == "armed":
                st.state, st.window, st.since = "watching", None, ln.time  # a pending window replaced by 'off'
            continue
        if " not selected for window " in msg:
            st.state, st.since = "not selected", ln.time
            st.window = msg.split(" not selected for window ", 1)[1].removesuffix("; not profiling")
            continue
        for prefix, state in _WINDOW_EVENTS:
            if msg.startswith(prefix):
                rest = msg[len(prefix) :]
                if state == "armed":
                    window = rest.split(", output below ", 1)[0]
                    selected = described_selects(window, st.rank) if st.rank is not None else None
                    state = "not selected" if selected is False else "armed"
                elif state == "recording":
                    window = rest.rsplit(" in ", 1)[0]
                else:
                    window = rest
                st.state, st.window, st.since = state, window, ln.time
                break
    latest_first = sorted(states.values(), key=lambda s: s.since, reverse=True)
    return sorted(latest_first, key=lambda s: (s.rank is None, s.rank if s.rank is not None else 0))
