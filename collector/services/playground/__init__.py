"""Playground runs: try a prompt on several inputs, models and repetitions at once."""
