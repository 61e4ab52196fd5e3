"""The workshop room: what a learner runs before the day (``preflight``) and how work comes back
(``handin``). ``preflight`` is standard library only: it runs with any system ``python3`` >= 3.8,
before the course's virtual environment exists."""
