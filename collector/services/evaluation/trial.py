"""Try an evaluator on a few records before saving it (docs/api-notes.md, "Online
evaluation"): the verdicts a rule would give, through the worker's own steps (the mapping of
:mod:`.targets`, the code evaluators of :mod:`.judging`), with nothing written.

LLM judges cannot be tried yet: the worker's judge path logs each call as a record and charges
it to a rule, which a trial must not do.
"""

from __future__ import annotations

from promptrail._evaluators import BUILT_IN

from ...errors import ContractError, ValidationFailed
from ...models.evaluation import RuleIn
from ...models.evaluator_trials import TrialIn, TrialOut
from ...store.evaluation_work import Candidate
from ...store.request_rows import RequestRow
from ..evaluators import Evaluator, parse_evaluators
from ..requests import RequestService
from .judging import run_code
from .targets import mapped


def _evaluator(definition: dict[str, object]) -> Evaluator:
    """The checked evaluator, or a 400 naming ``evaluator`` (or the key at fault)."""
    kind = definition.get("type")
    if kind == "llm_judge":
        raise ValidationFailed(
            "evaluator.type",
            "an llm_judge cannot be tried yet (its calls would be logged and charged): "
            f"try one of {', '.join(k for k in BUILT_IN if k != 'llm_judge')}",
        )
    try:
        return parse_evaluators([definition])[0]
    except ValidationFailed as exc:
        raise ValidationFailed("evaluator", str(exc)) from exc


def _candidate(row: RequestRow) -> Candidate:
    return Candidate(
        id=row.id,
        created_at=row.created_at,
        prompt_name=row.prompt_name,
        version=row.version,
        model=row.model,
        kind=row.kind,
        status=row.status,
        span_name=row.span_name,
        input=row.input,
        input_variables=row.input_variables,
        output=row.output,
        metadata=row.metadata,
        trace_id=row.trace_id,
    )


def try_evaluator(requests: RequestService, project: str, body: TrialIn) -> list[TrialOut]:
    """Each record's verdict, in the order asked; a record not in ``project`` is an item
    with its ``error``, not a failure of the whole trial."""
    evaluator = _evaluator(body.evaluator)
    spec = RuleIn.model_validate(
        {"name": "trial", "evaluator": "trial", "target": "record", "mapping": body.mapping}
    )
    out: list[TrialOut] = []
    for request_id in body.request_ids:
        try:
            row, _ = requests.detail(project, request_id)
        except ContractError as exc:
            out.append(TrialOut(request_id=request_id, error=str(exc)))
            continue
        given = mapped(spec, _candidate(row))
        verdict = run_code(evaluator, given)
        failed = verdict.decision != "scored"
        out.append(
            TrialOut(
                request_id=request_id,
                value=None if failed else verdict.value,
                reason=None if failed else verdict.reason,
                error=verdict.reason if failed else None,
                input=given.input,
                output=given.output,
                expected=given.expected,
            )
        )
    return out
