"""Advisories stage: classify changes, build OSV records, run their lifecycle, publish once, export.

Pure modules: `classify`, `osv`, `details`, `lifecycle`, `schema`. I/O edges: `service` (the store)
and `export` (files). Nothing is imported eagerly here, so pure modules stay free of the ORM.
"""
