"""``promptrail``: run the collector, manage API keys, back up, serve the provider stub.

One module per command group (``serve``, ``stub``, ``backup``, ``keys``), each importing only
``shared`` (console, errors, settings, the store); ``root`` attaches them to one typer app.
The console script is ``promptrail.collector.cli:main``.
"""

from .root import app, main

__all__ = ["app", "main"]
