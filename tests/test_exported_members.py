"""The public API is exactly what ``promptrail.__all__`` names."""

from __future__ import annotations

import subprocess
import sys

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


def test_every_public_name_resolves_and_importing_the_package_loads_only_what_is_used() -> None:
    """``import promptrail`` stays cheap: a collector command or an app that only captures does
    not pay for the REST client (httpx, its pydantic models) until it uses it."""
    script = (
        "import sys, promptrail\n"
        "loaded = sorted(m for m in ('httpx', 'promptrail._client', 'promptrail._types',"
        " 'opentelemetry.sdk') if m in sys.modules)\n"
        "assert not loaded, loaded\n"
        "for name in promptrail.__all__:\n"
        "    value = getattr(promptrail, name)\n"
        "    assert name == '__version__' or value.__module__.startswith('promptrail'), name\n"
        "assert 'promptrail._client' in sys.modules\n"
        "try:\n"
        "    promptrail.NoSuchName\n"
        "except AttributeError as exc:\n"
        "    assert 'NoSuchName' in str(exc)\n"
        "else:\n"
        "    raise AssertionError('no error')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert set(promptrail.__all__) <= set(dir(promptrail))
