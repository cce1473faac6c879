"""rankscope web app: a Dash dashboard over a rankscope store (``analyze serve``).

Importing the package creates nothing; call :func:`create_app` (or :func:`serve`).
"""

from __future__ import annotations

from typing import Any


def create_app(store: Any = None, token: str | None = None, control: Any = None) -> Any:
    """Build the Dash app for a store (see :func:`webapp.app.create_app`)."""
    from .app import create_app as _create_app

    return _create_app(store, token=token, control=control)


def serve(store: Any = None, host: str = "127.0.0.1", port: int = 8050, **kw: Any) -> None:
    """Serve the app (see :func:`webapp.app.serve`)."""
    from .app import serve as _serve

    _serve(store, host=host, port=port, **kw)


__all__ = ["create_app", "serve"]
