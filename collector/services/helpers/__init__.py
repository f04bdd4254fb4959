"""Small helpers of the services: cursors, dates, caches, buffers, templates."""
