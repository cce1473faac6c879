"""``python -m collector``: run an unmodified script under the collector, and small helpers.

    python -m collector run [--config FILE] [--static START:END] [--dynamic DIR] [--save-path DIR]
                            [--ranks 0,1] [--backend auto|torch|torch_npu] -- python train.py ...
    python -m collector show-config [--config FILE]      # the validated config, as JSON
    python -m collector init-dynamic DIR                   # write a profiler_config.json (profiling off)
    python -m collector analyse PATH [--max-process-number N] [--export-type text db]
                                                           # parse raw *_ascend_pt / *_ascend_ms folders

``run`` validates the config first (a bad one fails here, before training starts), passes it in
``$RANKSCOPE_PROFILER_OPTIONS`` and puts ``collector/_bootstrap`` first on ``PYTHONPATH``, then
replaces itself with the command (signals reach the training processes directly). Every Python
process started by the command (torchrun workers, mp.spawn children; not the torchrun launcher)
arms the collector; steps are counted from the optimizer. Without ``--config``, an existing
``$RANKSCOPE_PROFILER_OPTIONS`` is the base config.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from .config import ProfilerConfig
from .errors import CollectorError
from .sources import ENV_VAR, from_env, load_file

BOOTSTRAP = Path(__file__).resolve().parent / "_bootstrap"


def _base(args: argparse.Namespace) -> dict[str, Any]:
    if args.config:
        return load_file(args.config).to_transport()
    cfg = from_env()
    return cfg.to_transport() if cfg is not None else {}


def build_config(args: argparse.Namespace) -> ProfilerConfig:
    d = _base(args)
    sp = dict(d.get("static_param") or {})
    if args.static:
        try:
            a, b = args.static.split(":", 1)
            sp.update(start_step=int(a), end_step=int(b))
        except ValueError as exc:
            raise CollectorError(f"--static expects START:END (steps [START, END)), got {args.static!r}") from exc
        d["profile_type"] = "static"
    if args.dynamic:
        d["profile_type"] = "dynamic"
        d["dynamic_param"] = {**(d.get("dynamic_param") or {}), "config_path": args.dynamic}
    if args.save_path:
        sp["save_path"] = args.save_path
    if sp:
        d["static_param"] = sp
    if args.ranks:
        try:
            d["ranks"] = [int(r) for r in args.ranks.split(",") if r.strip()]
        except ValueError as exc:
            raise CollectorError(f"--ranks expects integers separated by commas, got {args.ranks!r}") from exc
    if args.backend:
        d["backend"] = args.backend
    return ProfilerConfig.from_dict(d, args.config or "command line")


def child_env(cfg: ProfilerConfig, environ: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if environ is None else environ)
    env[ENV_VAR] = json.dumps(cfg.to_transport(), separators=(",", ":"))
    old = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = str(BOOTSTRAP) + (os.pathsep + old if old else "")
    return env


def _cmd_run(args: argparse.Namespace) -> int:
    cmd = list(args.command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        print(
            "collector run: give the command after --, e.g. python -m collector run -- python train.py", file=sys.stderr
        )
        return 2
    cfg = build_config(args)
    env = child_env(cfg)
    try:
        os.execvpe(cmd[0], cmd, env)
    except OSError as exc:
        print(f"collector run: cannot start {cmd[0]!r}: {exc.strerror or exc}", file=sys.stderr)
        return 127
    return 0  # not reached


def _cmd_show(args: argparse.Namespace) -> int:
    cfg = build_config(args)
    print(json.dumps(cfg.as_dict(), indent=2))
    for n in cfg.notices:
        print(f"note: {n}", file=sys.stderr)
    return 0


def _cmd_init_dynamic(args: argparse.Namespace) -> int:
    from .config import ProfileOptions
    from .dynamic import DynamicWatcher, config_location

    _, path = config_location(args.folder)
    existed = path.exists()
    DynamicWatcher(
        args.folder, 1.0, ProfileOptions(), frozenset(), "./rankscope_profile", [-1], rank=lambda: "init-dynamic"
    ).init(0)
    print(f"{path} {'already existed (kept)' if existed else 'written (profiling off)'}")
    return 0


def _cmd_analyse(args: argparse.Namespace) -> int:
    from .backends import mindspore as msb
    from .backends.torch_npu import offline_analyse, unparsed_folders

    path = Path(args.path)
    if not path.exists():
        print(f"collector analyse: {path} does not exist", file=sys.stderr)
        return 2
    todo = unparsed_folders(path)
    ms_todo = msb.unparsed_folders(path)
    if not todo and not ms_todo:
        print(
            f"no unparsed *_ascend_pt / *_ascend_ms folder (raw FRAMEWORK/ or PROF_* data without "
            f"ASCEND_PROFILER_OUTPUT) below {path}"
        )
        return 0
    rc = 0
    if todo:
        try:
            done = offline_analyse(path, args.max_process_number, args.export_type)
        except ImportError as exc:
            print(
                f"collector analyse: torch_npu is needed to parse raw Ascend data ({exc}); run this on a host with "
                "torch_npu and the CANN toolkit",
                file=sys.stderr,
            )
            return 1
        for d in done:
            print(f"parsed {d}")
    if ms_todo:
        rc = max(rc, _analyse_mindspore(ms_todo, args))
    return rc


def _analyse_mindspore(folders: list[Path], args: argparse.Namespace) -> int:
    """MindSpore's offline analyse needs the ``profiler_info_{rank}.json`` its Ascend path writes at stop."""
    from .backends import mindspore as msb

    rc = 0
    parsable = [d for d in folders if msb.has_profiler_info(d)]
    for d in folders:
        if d not in parsable:
            print(
                f"collector analyse: {d}: MindSpore cannot parse this folder offline: its offline analyse needs "
                "profiler_info_{rank}.json, which MindSpore writes only on Ascend (its CPU profiler writes none); "
                "`analyze ingest` reads the raw FRAMEWORK/ files of this folder as they are",
                file=sys.stderr,
            )
            rc = 1
    if not parsable:
        return rc
    if args.export_type:
        print("collector analyse: --export-type is not used for MindSpore (profiler_info says what to write)")
    try:
        done = msb.offline_analyse(parsable, args.max_process_number)
    except ImportError as exc:
        print(f"collector analyse: MindSpore is needed to parse *_ascend_ms folders ({exc})", file=sys.stderr)
        return 1
    for d in parsable:
        if d in done:
            print(f"parsed {d}")
        else:
            print(f"collector analyse: MindSpore's analyse wrote nothing for {d} (see its logs/)", file=sys.stderr)
            rc = 1
    return rc


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m collector", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)

    def config_opts(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--config", help=f"tools.json, mindformers YAML or collector JSON/YAML file (default: ${ENV_VAR})"
        )
        p.add_argument(
            "--static", metavar="START:END", help="profile steps [START, END) (0-based, counted from the optimizer)"
        )
        p.add_argument("--dynamic", metavar="DIR", help="dynamic profiling: watch DIR/profiler_config.json")
        p.add_argument("--save-path", help="output folder (rank_{id}/ folders are created inside)")
        p.add_argument("--ranks", help="ranks to profile, e.g. 0,3 (-1 = all)")
        p.add_argument(
            "--backend",
            choices=["auto", "torch", "torch_npu", "mindspore"],
            help="profiler backend (auto: torch_npu.profiler when an NPU is visible, mindspore.profiler when the "
            "script imported MindSpore, else torch.profiler)",
        )

    run = sub.add_parser("run", help="run a command with the collector armed in every Python process")
    config_opts(run)
    run.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command, e.g. -- python train.py")
    run.set_defaults(func=_cmd_run)
    show = sub.add_parser("show-config", help="print the validated config (what `run` would use)")
    config_opts(show)
    show.set_defaults(func=_cmd_show)
    init = sub.add_parser("init-dynamic", help="create DIR/profiler_config.json with profiling off")
    init.add_argument("folder", help="the folder to watch (created if missing), or the .json file itself")
    init.set_defaults(func=_cmd_init_dynamic)
    an = sub.add_parser(
        "analyse",
        help="parse raw *_ascend_pt (torch_npu) / *_ascend_ms (MindSpore) folders left by an aborted or "
        "analyse:false window",
    )
    an.add_argument(
        "path",
        help="a folder: every *_ascend_pt / *_ascend_ms folder below it with raw data and no ASCEND_PROFILER_OUTPUT "
        "is parsed",
    )
    an.add_argument(
        "--max-process-number",
        type=int,
        metavar="N",
        help="parsing processes run at once (torch_npu's max_process_number; default: torch_npu's)",
    )
    an.add_argument(
        "--export-type",
        nargs="+",
        choices=["text", "db"],
        help="result format(s) to write (torch_npu's export_type; default: torch_npu's, text; MindSpore: unused)",
    )
    an.set_defaults(func=_cmd_analyse)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except CollectorError as exc:
        print(f"collector {args.cmd}: {exc}", file=sys.stderr)
        return 2
