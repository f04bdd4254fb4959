"""The console's files read without side-scrolling: every line under 100 characters.

ESLint checks the JavaScript (``make lint``); the stylesheet and the page have no linter here,
so this holds them to the same width.
"""

from __future__ import annotations

from pathlib import Path

STATIC = Path(__file__).resolve().parents[2] / "collector" / "console" / "static"


def test_every_console_file_line_is_under_100_characters() -> None:
    long_lines = [
        f"{path.name}:{number}"
        for path in sorted(STATIC.iterdir())
        if path.suffix in {".js", ".css", ".html"}
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if len(line) >= 100
    ]
    assert long_lines == []
