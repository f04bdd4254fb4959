"""``import promptrail`` stays light: no framework is imported until instrument() finds it."""

from __future__ import annotations

import subprocess
import sys

FRAMEWORKS = ("langchain", "llama_index", "pydantic_ai", "flask", "fastapi", "starlette")


def test_importing_promptrail_imports_no_framework() -> None:
    code = (
        "import sys, promptrail, promptrail.integrations.middleware; "
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({FRAMEWORKS!r})))"
    )

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert done.stdout.strip() == "[]"
