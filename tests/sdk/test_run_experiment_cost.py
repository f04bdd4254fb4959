"""``promptrail.run_experiment``'s results cost what their captured calls cost (issue 47
point 5): a live collector, the real ``openai`` SDK against the OpenAI wire stub inside the
task, captured and priced by the collector as usual."""

from __future__ import annotations

import pytest

import promptrail
from promptrail.testing import OpenAIStub
from tests.capitals_experiment import capitals_task


def _records_cost(sdk: promptrail.Client, trace_id: str) -> float:
    records = sdk.requests.list(trace_id=trace_id, kind="all")
    return sum(r.usage.estimated_cost_usd for r in records)


def test_a_run_experiment_summary_and_results_cost_their_captured_calls(
    live_url: str, sdk: promptrail.Client, openai_stub: OpenAIStub
) -> None:
    with capitals_task(live_url, sdk, openai_stub) as ask:
        # Run from inside the caller's own observed function: each result is still a trace of
        # its own, holding its calls alone.
        @promptrail.observe(name="nightly evaluation")
        def nightly() -> promptrail.ExperimentRun:
            return promptrail.run_experiment(
                "capitals", ask, ["contains"], repetitions=2, client=sdk, progress=False
            )

        run = nightly()

    results = list(sdk.experiments.results(run.id))
    assert len(results) == 4 and len({r.trace_id for r in results}) == 4
    captured = {r.trace_id: _records_cost(sdk, r.trace_id or "") for r in results}
    assert all(cost > 0 for cost in captured.values())
    # Each result costs its own trace's calls; the summary is their sum, at once (the
    # SDK ships the records before it completes the experiment) and on every read.
    assert {r.trace_id: r.estimated_cost_usd for r in results} == pytest.approx(captured)
    total = sum(captured.values())
    assert run.summary.estimated_cost_usd == pytest.approx(total)
    assert run.summary.total_tokens > 0
    assert sdk.experiments.get(run.id).summary.estimated_cost_usd == pytest.approx(total)
