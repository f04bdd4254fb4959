"""Rewrite the test modules' asserts once, in the controller, before the test workers start.

pytest rewrites each test module's ``assert`` statements when it imports the module and keeps
the rewritten code in a ``__pycache__`` file of its own, unless bytecode writing is off
(``PYTHONDONTWRITEBYTECODE``, as in this project's environment): then every worker of a
``pytest -n 3`` run parses and rewrites all ~260 test modules and conftest files again, ~6 s
of CPU each on this machine, out of the ~13 s a worker's collection takes (~7 s with the
rewritten code cached). The controller of such a run writes that cache once, with pytest's own
rewrite, before it starts the workers, which then load the cached code: the same code a worker
would have made (pytest checks each cached file against its source's hash before using it).
A run in one process (no workers) rewrites as it imports, as before; nothing is written then.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest
from _pytest.assertion import rewrite


def rewrite_ahead(config: pytest.Config, sources: list[Path]) -> int:
    """Write the rewritten code of every test module and conftest file of ``sources`` that has
    none cached yet, where pytest's import looks for it; return how many were written.

    Only what a worker would rewrite (pytest's ``python_files`` patterns and ``conftest.py``);
    a file that cannot be rewritten (a syntax error, say) is left for the worker to report.
    """
    # A pytest whose rewrite moved fails the run here, where it is plain, instead of silently
    # rewriting in every worker again.
    assert callable(rewrite._rewrite_test) and callable(rewrite._write_pyc), "pytest changed"
    state = config.stash[rewrite.assertstate_key]
    patterns = [*config.getini("python_files"), "conftest.py"]
    written = 0
    for source in sources:
        if not any(fnmatch.fnmatch(source.name, pattern) for pattern in patterns):
            continue
        cache = rewrite.get_cache_dir(source)
        pyc = cache / (source.name[:-3] + rewrite.PYC_TAIL)
        if rewrite._read_pyc(source, pyc) is not None:
            continue
        try:
            source_hash, code = rewrite._rewrite_test(source, config)
        except SyntaxError:
            continue
        if rewrite.try_makedirs(cache) and rewrite._write_pyc(state, code, source_hash, pyc):
            written += 1
    return written


def run_sources(config: pytest.Config) -> list[Path]:
    """The Python files under the run's paths (``tests`` by default), each once."""
    found: set[Path] = set()
    for arg in config.args:
        path = Path(config.invocation_params.dir, arg.split("::", 1)[0]).resolve()
        if path.is_dir():
            found.update(path.rglob("*.py"))
        elif path.suffix == ".py":
            found.add(path)
    return sorted(found)
