"""Check that a speed change left ``analyze report`` (text and ``--json``) and ``analyze summary``
byte for byte what they were: the same store read by the code of another revision and by this tree.

    python bench/check_report_output.py                 # against main
    python bench/check_report_output.py --before 227f1be

The store is made once by this tree's ``analyze ingest`` from the bundled 2-rank samples
(``sample_data/``) and the multi-rank test inputs below; each command then runs, whole process, with
each code (the other revision exported with ``git archive`` and put first on ``PYTHONPATH``), the
terminal 80 columns wide. Prints the commands whose output differs (with the first differing line) and
exits 1 when any does.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_commands import SAMPLES, export_tree

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
# multi-rank inputs of the tests: a straggler, several producers, three ranks
TEST_INPUTS = ("kineto_gloo_4rank_slow", "mindspore_npu_constructed", "msprof_constructed", "torch_npu_text_2023")


def _env(pythonpath: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    env["COLUMNS"] = "80"
    env.pop("PYTHONPATH", None)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return env


def _out(cmd: list[str], env: dict[str, str]) -> bytes:
    proc = subprocess.run(cmd, env=env, cwd=tempfile.gettempdir(), capture_output=True, check=False)
    return proc.stdout + b"\n[stderr]\n" + proc.stderr + f"\n[exit {proc.returncode}]\n".encode()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", default="main", help="git revision of the code to compare with (default main)")
    args = ap.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="report-output-"))
    try:
        before = export_tree(args.before, scratch)
        store = scratch / "store"
        inputs = [REPO / "sample_data" / s for s in SAMPLES] + [REPO / "tests" / "data" / s for s in TEST_INPUTS]
        py = [sys.executable, "-m", "analyzer"]
        for src in inputs:
            subprocess.run([*py, "ingest", str(src), "--run", src.name, "--store", str(store)], env=_env(None),
                           capture_output=True, check=True)  # fmt: skip
        commands = {}
        for src in inputs:
            for fmt in ([], ["--json"]):
                commands[f"report {src.name} {' '.join(fmt)}"] = [*py, "report", "--run", src.name, *fmt]
            commands[f"summary {src.name}"] = [*py, "summary", "--run", src.name]
        differ = 0
        for name, cmd in commands.items():
            cmd = [*cmd, "--store", str(store)]
            a, b = _out(cmd, _env(before)), _out(cmd, _env(None))
            if a == b:
                print(f"same     {name} ({len(b)} bytes)")
                continue
            differ += 1
            first = next(
                (i, x, y) for i, (x, y) in enumerate(zip(a.splitlines() + [b""], b.splitlines() + [b""])) if x != y
            )
            print(f"DIFFERS  {name}: line {first[0] + 1}\n  before: {first[1]!r}\n  now:    {first[2]!r}")
        print(f"{len(commands) - differ} of {len(commands)} outputs the same")
        return 1 if differ else 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
