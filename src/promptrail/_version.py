"""The package's version: the one place it is written.

``pyproject.toml`` reads it (``[tool.setuptools.dynamic]``), ``promptrail.__version__`` re-exports
it, the REST client's User-Agent and the tracer carry it.
"""

__version__ = "0.1.0"
