"""Schedules: fusion groups, dataflow orders and storage formats."""
from .schedule import Schedule

__all__ = ["Schedule"]
