"""The lineage stage: watched derivatives linked to their base models, and stale-derivative
advisories when a base changes a value a derivative still holds."""
