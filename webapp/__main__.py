"""``python -m webapp [--store PATH] [--host H] [--port N]``: same as ``analyze serve``."""

from __future__ import annotations

import argparse

from .app import serve


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m webapp", description="Serve the rankscope web app.")
    p.add_argument("--store", default=None, help="store folder (default: $RANKSCOPE_STORE, else ./rankscope_store)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8050, help="0 = any free port")
    a = p.parse_args(argv)
    serve(a.store, host=a.host, port=a.port)


if __name__ == "__main__":
    main()
