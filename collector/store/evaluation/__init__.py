"""Online evaluation's store (docs/api-notes.md, "Online evaluation"): evaluator versions,
rules (:mod:`.definitions`) and decisions (:mod:`.decisions`); the tables in :mod:`.tables`."""

from .decisions import WAITING, DecisionRow, DecisionStore, row_version
from .definitions import EvaluationStore, EvaluatorVersionRow, RuleRow
from .tables import EVALUATION_DECISIONS, EVALUATION_RULES, EVALUATOR_VERSIONS

__all__ = [
    "EVALUATION_DECISIONS",
    "EVALUATION_RULES",
    "EVALUATOR_VERSIONS",
    "WAITING",
    "DecisionRow",
    "DecisionStore",
    "EvaluationStore",
    "EvaluatorVersionRow",
    "RuleRow",
    "row_version",
]
