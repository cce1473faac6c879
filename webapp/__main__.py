"""``python -m webapp [--store PATH] [--host H] [--port N] [--token T] [--insecure] [--control DIR]``: same as
``analyze serve``."""

from __future__ import annotations

import argparse
import os
import sys

from .app import serve
from .auth import TOKEN_ENV_VAR
from .errors import WebappError


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m webapp", description="Serve the rankscope web app.")
    p.add_argument("--store", default=None, help="store folder (default: $RANKSCOPE_STORE, else ./rankscope_store)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8050, help="0 = any free port")
    p.add_argument("--token", default=os.environ.get(TOKEN_ENV_VAR) or None, help=f"access token (${TOKEN_ENV_VAR})")
    p.add_argument("--insecure", action="store_true", help="serve a non-loopback address without a token")
    p.add_argument("--control", default=None, help="a job's dynamic profiling folder: the Profiling page writes it")
    a = p.parse_args(argv)
    try:
        serve(a.store, host=a.host, port=a.port, token=a.token, insecure=a.insecure, control=a.control)
    except WebappError as exc:
        sys.exit(f"error: {exc}")


if __name__ == "__main__":
    main()
