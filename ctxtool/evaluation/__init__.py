"""Evaluating checkpoints against a model or hand keys: ``judge`` (a model answers the probes),
``stored`` (a stored checkpoint evaluated again), ``keys`` (hand-written answer keys).

The pure evaluator is ``ctxtool.core.evaluator``; its public names are re-exported here.
"""

from ..core import evaluator
from ..core.evaluator import *  # noqa: F403 (its public names, as the docs import them)

__all__ = evaluator.__all__
