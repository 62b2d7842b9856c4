"""The push side's store: webhook subscriptions, the delivery outbox and its log, poll requests.

Public: `WebhookStore` (over the store's engine), `OutboxTx` (the outbox inside the advisory
publish transaction: `AdvisoryTx.outbox`), the values and `WEBHOOK_TABLES`.
"""

from __future__ import annotations

from tracker.store.webhooks.queries import OutboxTx, WebhookStore, new_msg_id
from tracker.store.webhooks.tables import WEBHOOK_TABLES
from tracker.store.webhooks.values import (
    Attempt,
    Delivery,
    DeliveryState,
    Outcome,
    PollRequest,
    Secret,
    Subscription,
)

__all__ = [
    "WEBHOOK_TABLES",
    "Attempt",
    "Delivery",
    "DeliveryState",
    "OutboxTx",
    "Outcome",
    "PollRequest",
    "Secret",
    "Subscription",
    "WebhookStore",
    "new_msg_id",
]
