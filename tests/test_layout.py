"""The tests' layout holds: no test module imports another test module.

A test module that imports from another (a fixture, a step, a constant) makes running or
deleting one file change another, and pytest collects the imported tests twice over. Shared
fixtures live in a ``conftest.py``; shared steps and assertions in named helper modules
(``steps.py`` and the like) that are not test modules (tests/README.md).
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def is_test_module(name: str) -> bool:
    """Whether a dotted module name names a test module (its last part is ``test_*``)."""
    return name.rsplit(".", 1)[-1].startswith("test_")


def imported_test_modules(tree: ast.Module) -> list[str]:
    """The test modules a module's source imports, wherever the import statement stands."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if is_test_module(alias.name)]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if is_test_module(base):
                found.append(base)
            # `from tests.collector import test_x` imports a module by its name
            found += [
                f"{base}.{alias.name}" for alias in node.names if alias.name.startswith("test_")
            ]
    return found


def test_no_test_module_imports_another_test_module() -> None:
    offenders = {
        str(path.relative_to(TESTS.parent)): imported
        for path in sorted(TESTS.rglob("test_*.py"))
        if (imported := imported_test_modules(ast.parse(path.read_text(), filename=str(path))))
    }
    assert offenders == {}, "move what they share to a conftest.py or a helper module"


def test_the_check_sees_every_form_of_import() -> None:
    source = (
        "import tests.sdk.test_spool\n"
        "from tests.collector.test_runs import run\n"
        "from tests.collector import test_runs\n"
        "from . import test_local\n"
        "def f():\n    from tests.sdk.test_outage import ROOT\n"
        "from tests.collector.runs.steps import run\n"
        "import pytest\n"
    )
    assert imported_test_modules(ast.parse(source)) == [
        "tests.sdk.test_spool",
        "tests.collector.test_runs",
        "tests.collector.test_runs",
        ".test_local",
        "tests.sdk.test_outage",
    ]
