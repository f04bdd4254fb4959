"""The public API is exactly what ``promptrail.__all__`` names."""

from __future__ import annotations

import promptrail


def test_all_names_are_exported_and_documented() -> None:
    public = {name for name in dir(promptrail) if not name.startswith("_")}

    assert set(promptrail.__all__) - {"__version__"} <= public
    assert promptrail.__version__
    assert promptrail.__doc__


def test_capture_api_is_exported() -> None:
    capture = {"init", "instrument", "uninstrument", "observe", "context", "Context", "flush"}

    assert capture <= set(promptrail.__all__)
    assert isinstance(promptrail.context(user_id="u1"), promptrail.Context)
    assert promptrail.context.__doc__


def test_scores_api_is_exported() -> None:
    scores = {"score", "current_trace_id", "last_request_id", "feedback_token"}
    models = {"Score", "ScoreConfig", "FeedbackToken"}

    assert scores | models <= set(promptrail.__all__)
    for name in scores:
        assert getattr(promptrail, name).__doc__, name
    client = promptrail.Client(api_key="pr-x", base_url="http://127.0.0.1:9")
    with client:
        methods = {"create", "batch", "list", "get", "delete", "token"}
        assert methods <= {name for name in dir(client.scores) if not name.startswith("_")}


def test_experiments_api_is_exported() -> None:
    names = {"run_experiment", "ExperimentRun", "Dataset", "DatasetItem", "Experiment"}
    names |= {"ExperimentResult", "Comparison"}

    assert names <= set(promptrail.__all__)
    assert promptrail.run_experiment.__doc__
    client = promptrail.Client(api_key="pr-x", base_url="http://127.0.0.1:9")
    with client:
        datasets = {"create", "list", "get", "delete", "add_items", "add_from_requests", "items"}
        assert datasets <= {n for n in dir(client.datasets) if not n.startswith("_")}
        experiments = {"create", "get", "wait", "list", "results", "cancel", "compare"}
        experiments |= {"post_results", "complete"}
        assert experiments <= {n for n in dir(client.experiments) if not n.startswith("_")}
