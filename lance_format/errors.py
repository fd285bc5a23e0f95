"""The public name of the engine's one error hierarchy (defined in :mod:`lance_format.core.errors`).

``from lance_format.errors import InvalidInputError`` is what user code and the server import; every
class also matches the built-in exception of the same meaning (``ValueError``, ``FileNotFoundError``,
``OSError``, ...).
"""

from lance_format.core import errors as _core
from lance_format.core.errors import *  # noqa: F403  (the same names, one definition)

__all__ = list(_core.__all__)
