"""Record the torch_npu.profiler API surface the collector uses, from a published torch_npu wheel.

There is no NPU (and no torch_npu) on the machines that run the tests: installing torch_npu
without the CANN toolkit makes ``import torch`` itself fail. So the torch_npu backend is tested
against what this script reads from the wheel's Python sources **without importing them** (ast
only): parameter lists of the classes and functions called, the string values of the enum-like
constants, the ProfilerAction members, and the attributes ``profile.__init__`` sets.

    pip download --no-deps --only-binary=:all: torch-npu==2.13.0 -d /tmp/wheel
    python tests/data/torch_npu_2.13.0/record_signatures.py /tmp/wheel/torch_npu-2.13.0-*.whl

writes ``signatures.json`` beside this script.
"""

from __future__ import annotations

import ast
import hashlib
import json
import sys
import zipfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PROF = "torch_npu/profiler/"


def _params(fn: ast.FunctionDef) -> list[dict[str, Any]]:
    a = fn.args
    out: list[dict[str, Any]] = []
    pos = a.posonlyargs + a.args
    defaults = [None] * (len(pos) - len(a.defaults)) + list(a.defaults)
    for arg, d in zip(pos, defaults):
        out.append(
            {
                "name": arg.arg,
                "kind": "POSITIONAL_OR_KEYWORD",
                "default": None if d is None else ast.unparse(d),
                "has_default": d is not None,
            }
        )
    if a.vararg:
        out.append({"name": a.vararg.arg, "kind": "VAR_POSITIONAL", "default": None, "has_default": False})
    for arg, d in zip(a.kwonlyargs, a.kw_defaults):
        out.append(
            {
                "name": arg.arg,
                "kind": "KEYWORD_ONLY",
                "default": None if d is None else ast.unparse(d),
                "has_default": d is not None,
            }
        )
    if a.kwarg:
        out.append({"name": a.kwarg.arg, "kind": "VAR_KEYWORD", "default": None, "has_default": False})
    return out


def _find(tree: ast.Module, name: str) -> ast.AST:
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == name:
            return node
    raise KeyError(name)


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef:
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise KeyError(f"{cls.name}.{name}")


def _class_consts(cls: ast.ClassDef, constants: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for node in cls.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            v = node.value
            if isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name) and v.value.id == "Constant":
                out[node.targets[0].id] = constants[v.attr]
            elif isinstance(v, ast.Constant):
                out[node.targets[0].id] = v.value
    return out


def _self_attrs(fn: ast.FunctionDef) -> list[str]:
    names = []
    for node in ast.walk(fn):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                    names.append(t.attr)
    return sorted(set(names))


def record(wheel: Path) -> dict[str, Any]:
    with zipfile.ZipFile(wheel) as z:
        src = {n: z.read(n).decode("utf-8") for n in z.namelist() if n.startswith(PROF) and n.endswith(".py")}
        version_py = z.read("torch_npu/version.py").decode("utf-8")
    trees = {n: ast.parse(s) for n, s in src.items()}
    const_cls = _find(trees[PROF + "analysis/prof_common_func/_constant.py"], "Constant")
    constants: dict[str, Any] = {}
    for node in const_cls.body:  # type: ignore[attr-defined]
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Constant)
        ):
            constants[node.targets[0].id] = node.value.value
    prof_tree = trees[PROF + "profiler.py"]
    exp_tree = trees[PROF + "experimental_config.py"]
    sched_tree = trees[PROF + "scheduler.py"]
    profile_cls = _find(prof_tree, "profile")
    actions = [
        n.targets[0].id
        for n in _find(sched_tree, "ProfilerAction").body  # type: ignore[attr-defined]
        if isinstance(n, ast.Assign)
    ]
    activity_members = sorted(
        {
            node.attr
            for t in trees.values()
            for node in ast.walk(t)
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "ProfilerActivity"
        }
    )
    init_all: list[str] = []
    for node in trees[PROF + "__init__.py"].body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            init_all = [e.value for e in node.value.elts]  # type: ignore[attr-defined]
    version = next(
        line.split("=", 1)[1].strip().strip("'\"") for line in version_py.splitlines() if line.startswith("__version__")
    )
    return {
        "recorded_from": wheel.name,
        "wheel_sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
        "torch_npu_version": version,
        "note": "Read with ast from the wheel's Python sources; nothing was imported or executed. "
        "ProfilerActivity is a C++ enum (torch_npu._C._profiler): its members are the ones the Python sources "
        "reference.",
        "torch_npu.profiler.__all__": init_all,
        "profile.__init__": _params(_method(profile_cls, "__init__")),  # type: ignore[arg-type]
        "profile.__init__.self_attributes": _self_attrs(_method(profile_cls, "__init__")),  # type: ignore[arg-type]
        "profile.methods": sorted(n.name for n in profile_cls.body if isinstance(n, ast.FunctionDef)),  # type: ignore[attr-defined]
        "tensorboard_trace_handler": _params(_find(prof_tree, "tensorboard_trace_handler")),  # type: ignore[arg-type]
        "analyse": _params(_find(prof_tree, "analyse")),  # type: ignore[arg-type]
        "_ExperimentalConfig.__init__": _params(_method(_find(exp_tree, "_ExperimentalConfig"), "__init__")),  # type: ignore[arg-type]
        "ProfilerLevel": _class_consts(_find(exp_tree, "ProfilerLevel"), constants),  # type: ignore[arg-type]
        "AiCMetrics": _class_consts(_find(exp_tree, "AiCMetrics"), constants),  # type: ignore[arg-type]
        "ExportType": _class_consts(_find(exp_tree, "ExportType"), constants),  # type: ignore[arg-type]
        "ProfilerAction": actions,
        "Schedule.__init__": _params(_method(_find(sched_tree, "Schedule"), "__init__")),  # type: ignore[arg-type]
        # the step -> action rule, as source text: the tests run it to check the windows' schedules
        "Schedule.__call__.source": ast.get_source_segment(
            src[PROF + "scheduler.py"],
            _method(_find(sched_tree, "Schedule"), "__call__"),  # type: ignore[arg-type]
        ),
        "ProfilerActivity": activity_members,
    }


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    data = record(Path(argv[0]))
    out = HERE / "signatures.json"
    out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
