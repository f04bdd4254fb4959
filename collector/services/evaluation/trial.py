"""Try an evaluator on a few records before saving it (docs/api-notes.md, "Online
evaluation"): the verdicts a rule would give, through the worker's own steps (the mapping of
:mod:`.targets`, the code evaluators and the judges of :mod:`.judging`), with no evaluator,
score or decision written.

A judge's calls are made as the worker's are (the credential order, each call a priced record
in ``promptrail-evaluation`` with ``metadata.judge_of``), marked ``metadata.trial`` instead of
a rule: no rule's budget counts them, the connection's monthly budget does. What one trial may
spend is bounded: one call per record (at most :data:`MAX_TRIAL_RECORDS`), at most
:data:`TRIAL_JUDGES_AT_ONCE` at once, and a route not yet known to work is tried by one call
at a time: once it fails, the trial's other records on it are errors without a call.
"""

from __future__ import annotations

import asyncio

import anyio

from ...errors import ContractError, ValidationFailed
from ...models.evaluation import RuleIn
from ...models.evaluator_trials import MAX_TRIAL_RECORDS, TrialIn, TrialOut
from ...store.evaluation_work import Candidate
from ...store.request_rows import RequestRow
from ..evaluators import Evaluator, parse_evaluators
from ..requests import RequestService
from ..runs import RunService
from .judging import Judges, run_code
from .targets import Mapped, mapped

__all__ = ["MAX_TRIAL_RECORDS", "TRIAL_JUDGES_AT_ONCE", "try_evaluator"]

# A trial's judge calls at once (the worker makes up to 8 for a rule; a trial is a person
# waiting on a page, and shares the connection with the live rules).
TRIAL_JUDGES_AT_ONCE = 4


def _evaluator(definition: dict[str, object]) -> Evaluator:
    """The checked evaluator, or a 400 naming ``evaluator`` (or the key at fault)."""
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


def _given(
    requests: RequestService, project: str, spec: RuleIn, ids: list[str]
) -> list[Mapped | str]:
    """Each record's mapped input, output and expected, or why it cannot be read."""
    out: list[Mapped | str] = []
    for request_id in ids:
        try:
            row, _ = requests.detail(project, request_id)
        except ContractError as exc:
            out.append(str(exc))
            continue
        out.append(mapped(spec, _candidate(row)))
    return out


async def try_evaluator(
    requests: RequestService, runs: RunService, project: str, body: TrialIn
) -> list[TrialOut]:
    """Each record's verdict, in the order asked; a record not in ``project``, or a judge
    call that fails (its connection's status: ``auth_invalid``, ``quota_exceeded``,
    ``unreachable``, ``budget_exceeded``), is an item with its ``error``, not a failure of
    the whole trial."""
    evaluator = _evaluator(body.evaluator)
    spec = RuleIn.model_validate(
        {"name": "trial", "evaluator": "trial", "target": "record", "mapping": body.mapping}
    )
    found = await anyio.to_thread.run_sync(_given, requests, project, spec, body.request_ids)
    # One Judges per trial: a route another trial or the worker found failing is called
    # again (the person trying may just have fixed its key), but once per trial.
    judges = Judges(runs)
    gate = asyncio.Semaphore(TRIAL_JUDGES_AT_ONCE)

    async def one(request_id: str, given: Mapped | str) -> TrialOut:
        if isinstance(given, str):
            return TrialOut(request_id=request_id, error=given)
        if evaluator.type != "llm_judge":
            verdict = run_code(evaluator, given)
        else:
            async with gate:
                verdict = await judges.judge(project, None, evaluator, request_id, given)
        failed = verdict.decision != "scored"
        return TrialOut(
            request_id=request_id,
            value=None if failed else verdict.value,
            reason=None if failed else verdict.reason,
            error=verdict.reason if failed else None,
            input=given.input,
            output=given.output,
            expected=given.expected,
            judge_request_id=verdict.judge_request_id,
            cost_usd=verdict.cost_usd,
        )

    return list(
        await asyncio.gather(*(one(i, g) for i, g in zip(body.request_ids, found, strict=True)))
    )
