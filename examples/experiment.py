"""Make a dataset from the log, compare two versions over it, move the label to the winner.

The loop a prompt registry exists for: version 1 serves traffic (the collector runs it), some
answers get a thumbs down, those records become a dataset, version 2 runs over it next to
version 1 on the service, and ``production`` moves to version 2 only if no score regressed
(no 95% interval of a paired delta lies wholly below zero)::

    OPENAI_API_KEY=sk-... make run             # a real provider (OPENAI_BASE_URL: any compatible)
    make demo                                  # or, without provider access: stub + collector
    export PROMPTRAIL_API_KEY=pr-...           # the key it printed
    .venv/bin/python examples/experiment.py

Environment: ``PROMPTRAIL_BASE_URL`` (default http://127.0.0.1:8000), ``PROMPTRAIL_API_KEY``
(required), ``PROMPTRAIL_EXAMPLE_MODEL`` (default gpt-4o-mini).
"""

from __future__ import annotations

import contextlib
import os
import sys

import promptrail

PROMPT = "example-support"
DATASET = "example-thumbed-down"
V1 = "Answer the customer's question briefly: {question}"
V2 = "You are a friendly support agent. Answer in one clear sentence: {question}"
QUESTIONS = [
    "How do I reset my password?",
    "Can I change my plan mid-month?",
    "Where do I find my invoices?",
    "Do you support single sign-on?",
]
EVALUATORS = [{"type": "similarity"}, {"type": "contains", "name": "keeps_answer"}]


def serve_traffic(client: promptrail.Client, model: str) -> int:
    """Put version 1 in production, answer the questions with it, thumb some answers down."""
    try:
        client.prompts.create(PROMPT, V1, model, labels=["production"])
    except promptrail.ConflictError:
        client.prompts.update(PROMPT, template=V1, model=model, labels=["production"])
    production = client.prompts.get(PROMPT).version
    for n, question in enumerate(QUESTIONS):
        result = client.prompts.run(PROMPT, label="production", variables={"question": question})
        assert isinstance(result, promptrail.RunResult)
        print(f"v{production}: {question} -> {result.output}")
        if n % 2 == 0:  # a reviewer's thumbs down (a score, CONTRACT 9)
            client.scores.create("thumbs", "down", request_id=result.id, source="annotation")
    return production


def main() -> None:
    """Serve, collect, compare, decide."""
    base_url = os.environ.get("PROMPTRAIL_BASE_URL", "http://127.0.0.1:8000")
    api_key = os.environ.get("PROMPTRAIL_API_KEY")
    if not api_key:
        sys.exit("set PROMPTRAIL_API_KEY to a collector key (make run prints one)")
    model = os.environ.get("PROMPTRAIL_EXAMPLE_MODEL", "gpt-4o-mini")
    with promptrail.Client(api_key, base_url) as client:
        production = serve_traffic(client, model)

        # The thumbed-down records, with what they answered as the answer to beat.
        with contextlib.suppress(promptrail.ConflictError):
            client.datasets.create(DATASET, description="answers a reviewer thumbed down")
        added = client.datasets.add_from_requests(
            DATASET,
            filters={"prompt_name": PROMPT, "score.thumbs": "down"},
            output_as_expected=True,
        )
        print(f"\ndataset {DATASET!r}: {added} records from the log")

        candidate = client.prompts.update(PROMPT, template=V2).version  # no label moves yet
        runs = {
            version: client.experiments.create(
                DATASET, PROMPT, version=version, evaluators=EVALUATORS, name=f"v{version}"
            )
            for version in (production, candidate)
        }
        done = {version: client.experiments.wait(run.id) for version, run in runs.items()}
        for version, experiment in done.items():
            scores = {n: s.mean for n, s in experiment.summary.scores.items()}
            print(f"v{version}: {experiment.status}, {experiment.counts.done} results, {scores}")

        comparison = client.experiments.compare(done[production].id, done[candidate].id)
        regressed = []
        for name, score in comparison.scores.items():
            print(
                f"{name}: {score['base']:.3f} -> {score['candidate']:.3f} "
                f"(delta {score['delta']:+.3f}, 95% [{score['ci_low']:+.3f}, "
                f"{score['ci_high']:+.3f}]; {score['improved']} better, "
                f"{score['regressed']} worse)"
            )
            if score["ci_high"] is not None and score["ci_high"] < 0:
                regressed.append(name)
        if regressed:
            print(f"production stays on v{production}: {', '.join(regressed)} regressed")
        else:
            client.prompts.set_label(PROMPT, "production", candidate)
            print(f"production moves to v{candidate}")


if __name__ == "__main__":
    main()
