"""Thin ipywidgets / plotly layers over the pure engines (each module names its widget).

Every widget catches :class:`~inferopt.errors.CourseError` and shows the message inside itself,
and has a short deterministic ``repr`` (what nbval compares for a displayed widget).
"""
