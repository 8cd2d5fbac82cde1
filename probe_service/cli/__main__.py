"""``python -m probe_service.cli``: the same as the ``byte-probe`` console script."""

from .main import entry_point

entry_point()
