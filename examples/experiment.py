"""Make a dataset from the log, compare two versions over it, move the label to the winner.

The loop a prompt registry exists for: version 1 serves traffic (the collector runs it), a
reviewer reads some answers and thumbs down those that do not send the customer to the help
center, those records become a dataset, version 2 (which asks for the link) runs over it next
to version 1 on the service, and ``production`` moves to version 2 only if the comparison says
"better" for some score (its 95% interval of the paired delta lies wholly above zero) and
"worse" for none (wholly below)::

    OPENAI_API_KEY=sk-... make run             # a real provider (OPENAI_BASE_URL: any compatible)
    make demo                                  # or, without provider access: stub + collector
    export PROMPTRAIL_API_KEY=pr-...           # the key it printed
    .venv/bin/python examples/experiment.py

The provider stub of ``make demo`` (``promptrail stub-provider``) answers "Echo: " and the
prompt it was sent, so version 2's answers carry the help center's address and version 1's do
not: the comparison says "better" and the label moves. Against ``promptrail stub-provider
--fixed`` (one answer to everything) it says "no clear difference" and the label stays.

Environment: ``PROMPTRAIL_BASE_URL`` (default http://127.0.0.1:8000), ``PROMPTRAIL_API_KEY``
(required), ``PROMPTRAIL_EXAMPLE_MODEL`` (default gpt-4o-mini).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from typing import Any

import promptrail

PROMPT = "example-support"
DATASET = "example-thumbed-down"
HELP_CENTER = "help.example.com"
V1 = "Answer the customer's question briefly: {question}"
V2 = f"Answer the customer's question briefly, and point to {HELP_CENTER} for details: {{question}}"
QUESTIONS = [
    "How do I reset my password?",
    "Can I change my plan mid-month?",
    "Where do I find my invoices?",
    "Do you support single sign-on?",
]
# What the reviewer asked for (the answer links the help center), and a guard that the fix
# does not cost brevity (40 words at most). Neither needs an expected output.
EVALUATORS = [
    {"type": "regex", "name": "links_help_center", "pattern": re.escape(HELP_CENTER)},
    {"type": "regex", "name": "brief", "pattern": r"^\s*(?!(?:\S+\s+){40}\S)"},
]


def serve_traffic(client: promptrail.Client, model: str) -> int:
    """Put version 1 in production, answer the questions with it, thumb down the reviewed
    answers without the help center's address."""
    try:
        client.prompts.create(PROMPT, V1, model, labels=["production"])
    except promptrail.ConflictError:
        client.prompts.update(PROMPT, template=V1, model=model, labels=["production"])
    production = client.prompts.get(PROMPT).version
    for n, question in enumerate(QUESTIONS):
        result = client.prompts.run(PROMPT, label="production", variables={"question": question})
        assert isinstance(result, promptrail.RunResult)
        print(f"v{production}: {question} -> {result.output}")
        # A reviewer reads every other answer; one without the link gets a thumbs down.
        if n % 2 == 0 and HELP_CENTER not in result.output:
            client.scores.create(
                "thumbs",
                "down",
                request_id=result.id,
                source="annotation",
                comment=f"does not point to {HELP_CENTER}",
            )
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

        # The thumbed-down records: their variables are the questions to answer better.
        with contextlib.suppress(promptrail.ConflictError):
            client.datasets.create(DATASET, description="answers a reviewer thumbed down")
        added = client.datasets.add_from_requests(
            DATASET, filters={"prompt_name": PROMPT, "score.thumbs": "down"}
        )
        print(f"\ndataset {DATASET!r}: {added} records from the log")

        candidate = client.prompts.update(PROMPT, template=V2).version  # no label moves yet
        done: dict[int, promptrail.Experiment] = {}
        for version in (production, candidate):  # each over the whole dataset, on the service
            run = client.experiments.create(
                DATASET, PROMPT, version=version, evaluators=EVALUATORS, name=f"v{version}"
            )
            done[version] = experiment = client.experiments.wait(run.id)
            scores = {n: s.mean for n, s in experiment.summary.scores.items()}
            print(f"v{version}: {experiment.status}, {experiment.counts.done} results, {scores}")

        comparison = client.experiments.compare(done[production].id, done[candidate].id)
        verdicts = {name: verdict(score) for name, score in comparison.scores.items()}
        for name, score in comparison.scores.items():
            print(
                f"{name}: {score['base']:.3f} -> {score['candidate']:.3f} "
                f"(delta {score['delta']:+.3f}, 95% [{score['ci_low']:+.3f}, "
                f"{score['ci_high']:+.3f}]; {score['improved']} better, "
                f"{score['regressed']} worse): {verdicts[name]}"
            )
        worse = [name for name, said in verdicts.items() if said == "worse"]
        better = [name for name, said in verdicts.items() if said == "better"]
        if worse:
            print(f"production stays on v{production}: {', '.join(worse)} worse")
        elif not better:
            print(f"production stays on v{production}: no score is better")
        else:
            client.prompts.set_label(PROMPT, "production", candidate)
            print(f"production moves to v{candidate}: {', '.join(better)} better")


def verdict(score: dict[str, Any]) -> str:
    """What the comparison says of one score, as the console does: "better" when the 95%
    interval of the paired delta lies above zero, "worse" below, else "no clear difference"."""
    low, high = score["ci_low"], score["ci_high"]
    if low is not None and low > 0:
        return "better"
    if high is not None and high < 0:
        return "worse"
    return "no clear difference"


if __name__ == "__main__":
    main()
