"""The controller's rewrite of the test modules is the one their workers load
(tests/rewrite_ahead.py): pytest's own rewritten code, where its import looks for it."""

from __future__ import annotations

from pathlib import Path

import pytest
from _pytest.assertion import rewrite

from tests.rewrite_ahead import rewrite_ahead

SAMPLE = "def test_sample():\n    seen = 1\n    assert seen == 2\n"


def test_a_test_module_is_rewritten_once_where_pytest_reads_it(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    module = tmp_path / "test_sample.py"
    module.write_text(SAMPLE)
    (tmp_path / "conftest.py").write_text("")
    helper = tmp_path / "helper.py"
    helper.write_text(SAMPLE)
    sources = [module, tmp_path / "conftest.py", helper]

    assert rewrite_ahead(request.config, sources) == 2
    assert rewrite_ahead(request.config, sources) == 0  # cached: not written again

    cache = rewrite.get_cache_dir(module)
    code = rewrite._read_pyc(module, cache / f"test_sample{rewrite.PYC_TAIL}")
    assert code is not None  # pytest's import takes it: the source's hash matches
    assert not (cache / f"helper{rewrite.PYC_TAIL}").exists()  # not a test module
    namespace: dict[str, object] = {}
    exec(code, namespace)
    with pytest.raises(AssertionError) as failed:
        namespace["test_sample"]()  # type: ignore[operator]
    assert "assert 1 == 2" in str(failed.value)  # the rewritten assert explains itself

    module.write_text(SAMPLE.replace("2", "3"))
    assert rewrite._read_pyc(module, cache / f"test_sample{rewrite.PYC_TAIL}") is None
    assert rewrite_ahead(request.config, sources) == 1  # a changed module is rewritten again
