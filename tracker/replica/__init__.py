"""A local Hub replica: serves git repositories under a root over the Hub HTTP API subset the client uses."""

from __future__ import annotations

from tracker.replica.server import Replica, RequestRecord

__all__ = ["Replica", "RequestRecord"]
