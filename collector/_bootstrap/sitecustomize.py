"""rankscope collector bootstrap (on PYTHONPATH only under `python -m collector run`).

Arms the collector from $RANKSCOPE_PROFILER_OPTIONS, then runs the sitecustomize this one
shadows, if any, so the environment behaves as it would without the collector.
"""

import os
import sys


def _rankscope_boot() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        try:
            from collector.autorun import install_from_env
        except ImportError:  # collector not installed in this interpreter: use the copy we came from
            sys.path.append(os.path.dirname(os.path.dirname(here)))
            from collector.autorun import install_from_env
        install_from_env()
    except Exception as exc:  # noqa: BLE001 - never break the user's program
        sys.stderr.write(f"rankscope collector: not active: {type(exc).__name__}: {exc}\n")
    for entry in list(sys.path):
        try:
            if not entry or os.path.abspath(entry) == here:
                continue
        except (TypeError, ValueError):
            continue
        cand = os.path.join(entry, "sitecustomize.py")
        if os.path.isfile(cand):
            import importlib.util

            spec = importlib.util.spec_from_file_location("_rankscope_shadowed_sitecustomize", cand)
            if spec is not None and spec.loader is not None:
                mod = importlib.util.module_from_spec(spec)
                try:
                    spec.loader.exec_module(mod)
                except Exception as exc:  # noqa: BLE001 - the shadowed file's failure must not stop the user's program
                    sys.stderr.write(f"rankscope collector: {cand} failed: {type(exc).__name__}: {exc}\n")
            break


_rankscope_boot()
del _rankscope_boot
