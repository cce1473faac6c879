"""CI set-up check: the plain package (no extra) installed into a fresh venv serves the web app.

``python tests/plain_install.py [PROJECT_DIR]`` (``make check-install``; ``make test`` runs it before
the suite): makes a new venv in a temporary folder, ``pip install PROJECT_DIR`` (a real, non-editable
install with every dependency resolved by pip; its wheel cache makes a repeat fast), then, from
another folder so nothing is imported from the source tree, starts ``analyze serve --port 0`` over an
empty store, reads the printed URL, and fetches the page, the Dash layout and every asset the page
names (the package must ship them). Exits non-zero with the reason on the first failure; stops the
server by its PID.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import venv
from pathlib import Path

TIMEOUT_S = 120.0  # server start on a busy machine


def _get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=60) as resp:
        return resp.status, resp.read().decode("utf-8", "replace")


def check(project: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="rankscope-plain-") as tmp:
        env_dir = Path(tmp) / "venv"
        venv.EnvBuilder(with_pip=True).create(env_dir)
        bindir = env_dir / ("Scripts" if os.name == "nt" else "bin")
        py = bindir / "python"
        print(f"plain install: pip install {project} into a fresh venv", flush=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-compile", str(project)], check=True)
        work = Path(tmp) / "work"
        work.mkdir()
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RANKSCOPE_STORE")}
        proc = subprocess.Popen(
            [str(bindir / "analyze"), "serve", "--port", "0", "--store", str(work / "store")],
            cwd=work,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            url = None
            deadline = time.monotonic() + TIMEOUT_S
            lines = []
            assert proc.stdout is not None
            while url is None and time.monotonic() < deadline:
                line = proc.stdout.readline()
                if not line:
                    break
                lines.append(line)
                m = re.search(r"at (http://\S+)", line)
                if m:
                    url = m.group(1)
            if url is None:
                raise SystemExit("plain install: `analyze serve` printed no URL:\n" + "".join(lines))
            status, html = _get(url)
            if status != 200 or "rankscope" not in html:
                raise SystemExit(f"plain install: GET {url} gave {status}")
            status, layout = _get(url + "_dash-layout")
            if status != 200 or "nav-overview" not in layout:
                raise SystemExit(f"plain install: the Dash layout at {url}_dash-layout has no navigation")
            assets = re.findall(r'(?:href|src)="(/assets/[^"?]+)', html)
            if not any(a.endswith(".css") for a in assets):
                raise SystemExit(f"plain install: the page names no stylesheet of the package: {assets}")
            for a in assets:
                status, _ = _get(url.rstrip("/") + a)
                if status != 200:
                    raise SystemExit(f"plain install: asset {a} gave {status}")
            print(f"plain install: `analyze serve` answered at {url} (page, layout, {len(assets)} assets)", flush=True)
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


if __name__ == "__main__":
    check(Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]).resolve())
