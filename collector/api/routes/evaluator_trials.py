"""Try an evaluator on a few records without saving it (docs/api-notes.md, "Online
evaluation")."""

from __future__ import annotations

from fastapi import APIRouter

from ...models.envelopes import Data
from ...models.evaluator_trials import TrialIn, TrialOut
from ...services.evaluation.trial import try_evaluator
from ..deps import Project, ServicesDep

router = APIRouter(prefix="/evaluators", tags=["evaluation"])


@router.post("/try", response_model=Data[list[TrialOut]])
async def try_on_records(
    body: TrialIn, project: Project, services: ServicesDep
) -> Data[list[TrialOut]]:
    """Each record's verdict by this evaluator (and the mapping given, else the rule's
    default), in the order asked; nothing is written but a judge's calls (priced records of
    ``promptrail-evaluation``)."""
    results = await try_evaluator(services.requests, services.runs, project, body)
    return Data(data=results)
