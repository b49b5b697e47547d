"""Schedules: fusion groups, dataflow orders and storage formats."""
from .schedule import OrderChoice, Schedule

__all__ = ["OrderChoice", "Schedule"]
