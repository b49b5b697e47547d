"""Help topics for `fuseflow help TOPIC`: plain-text pages shipped as package data.

    >>> sorted(TOPICS)
    ['datasets', 'models', 'schedules']
    >>> topic_text("schedules").splitlines()[0]
    'SCHEDULES'
"""
from __future__ import annotations

from importlib import resources

TOPICS = {"schedules": "the schedule grammar, op names, examples per model",
          "models": "the model forms every command takes",
          "datasets": "graph datasets, the data directory and downloads"}


def topic_text(name: str) -> str:
    """The text of one topic."""
    return resources.files(__package__).joinpath(f"{name}.md").read_text(encoding="utf-8").rstrip()
