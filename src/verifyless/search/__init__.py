"""Search strategies (``registry`` maps names to them) and the ``SearchStrategy`` protocol (``base``)."""

from verifyless.search.base import Expansion, SearchStrategy, SearchView

__all__ = ["Expansion", "SearchStrategy", "SearchView"]
