"""Capture: the path of a record from the call that made it to the collector.

A captured call or observed function ends a light span (``spans.py``), sampled by trace id
(``sampling_and_fork.py``); the shipper (``shipping.py``) queues it and, on its own thread,
turns it into a record for the sender (``send.py``), which masks, encodes, posts and
retries it, telling the collector's reachability apart (``reachability.py``); what the
collector cannot take waits in memory, bounded, and during an outage in the disk spool
(``spool.py``), which replays it once the collector is back. Every record's fate is counted
(``stats.py``). Scores take the same pipeline to another endpoint (``endpoints.py``);
``pipelines.py`` builds the pipelines ``promptrail.init`` asks for.
"""
