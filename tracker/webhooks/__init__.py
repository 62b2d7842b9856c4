"""The push side: outgoing signed webhooks (Standard Webhooks) and the Hub's incoming ones.

- `signing`: secrets and the `webhook-*` headers (pure).
- `events`: which advisories of a revision a subscription receives, and the body (pure).
- `ssrf`: the target guard (no loopback, private or link-local addresses unless allowed).
- `deliver`: the worker that sends the outbox (`tracker.store.webhooks`) and logs every attempt.
- `hub`: the Hub's webhook payload, read into a poll request.
"""
