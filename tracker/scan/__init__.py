"""`tracker scan`: the model pins in a codebase (where code names a Hub repo and a revision) and
the transformers/vLLM versions it runs, matched against the store's history and advisories.

`pins` finds them (pure: reads files, no store); `report` matches them with the store; `sarif`
renders a report as SARIF 2.1.0.
"""
