"""The dashboard at ``/dashboard`` (``views.py``), its login cookie (``session.py``) and
what its overview counts (``stats.py``); pages are Jinja templates in ``templates/``."""
