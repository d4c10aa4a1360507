"""Probe-based evaluation of compaction summaries, pure (a model judges in ``evaluation.judge``).

``evaluate(span, summary, kept)`` answers the probes a continuing agent has against the
restored context, lists what the summary invents and what each section costs;
``meets_floor`` and ``carry_over`` are the quality gate's rules.
"""

from ..checkpoint_quality import describe_evaluation as describe
from .answers import ContextText, Verdict, answer
from .boilerplate import boilerplate_in
from .evaluate import Evaluation, SectionCost, evaluate, section_costs
from .fabrications import Fabrication, fabrications
from .gate import DEFAULT_MIN_QUALITY, CarryOver, FloorCheck, carry_over, meets_floor
from .probes import InvalidKey, Probe, ProbeKind, derive_probes, probe_from_dict

__all__ = [
    "DEFAULT_MIN_QUALITY",
    "CarryOver",
    "ContextText",
    "Evaluation",
    "Fabrication",
    "FloorCheck",
    "InvalidKey",
    "Probe",
    "ProbeKind",
    "SectionCost",
    "Verdict",
    "answer",
    "boilerplate_in",
    "carry_over",
    "derive_probes",
    "describe",
    "evaluate",
    "fabrications",
    "meets_floor",
    "probe_from_dict",
    "section_costs",
]
