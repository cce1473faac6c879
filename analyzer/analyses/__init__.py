"""Cluster analyses over the store: every function takes a Store and a run and returns a DataFrame.

Definitions follow msprof-analyze (see docs/analyses.md); wall-time categories are interval unions.
"""

from __future__ import annotations

from .step_breakdown import step_breakdown

__all__ = ["step_breakdown"]
