"""Transport faults that look like content, over the whole demo (issue 26, item 1; `make soak`,
`python -m bench.run contentfaults`).

The installed `tracker poll --once` reads the nine demo repos (`tracker/demo_data/repos`) through
the fault proxy, which answers every 3rd file download, then in a second trial every one, with
each of `bench.netfaults.content_faults`: a `Content-Length` of 100 MB on the true body, an 80 MB
body, a gzip body that decodes to 100 MB (the cap is 64 MB), a `404` with `X-Error-Code:
EntryNotFound` for a file the tree lists. Then the faults stop and it polls again. The store must
equal a clean run's (`bench.netfaults.fault_trial`: files, blobs, trees, diffs, estimates,
advisories by natural keys) and pass `tracker verify`; `poll --once` exits 1 exactly while a repo
is left pending. The short form (one repo) is tests/reliability/test_transport_content_faults.py.
"""

from __future__ import annotations

import json
import time

from bench.netfaults import content_faults, fault_trial, setting
from tracker.replica.demo import DEMO_DIR

DEMO_REPOS = tuple(
    sorted(p.name.replace("__", "/", 1) for p in (DEMO_DIR / "repos").iterdir() if p.is_dir())
)
EVERY = (3, 1)


def run() -> str:
    lines = [
        "## Transport faults that look like content (`make soak`, "
        "`python -m bench.run contentfaults`)",
        "",
        f"The installed `tracker poll --once` reads the whole demo ({len(DEMO_REPOS)} repos) "
        "through the fault proxy answering every Nth file download with the fault; then the "
        "faults stop and it polls again. 'pending' is the repos `tracker watch list` shows "
        "failing after the faulty poll; 'equal' means the store equals a clean run's (files, "
        "blobs, trees, diffs, estimates, advisories by natural keys); before issue 26 each "
        'fault was stored as "could not read FILE" and published.',
        "",
        "| fault | every Nth download | faults applied | faulty poll exit | pending repos "
        "| verify after faulty poll | polls to recover | equal to clean run | verify |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    failures = 0
    with setting(DEMO_REPOS) as (workdir, hub, watchlist, reference):
        advisories = len(reference.get("advisories", []))
        for every in EVERY:
            for name, faults in content_faults(every).items():
                started = time.monotonic()
                r = fault_trial(name, faults, 1, workdir, hub, watchlist, reference, inspect=True)
                consistent = (r.faulty_exit == 1) == bool(r.pending)
                ok = r.ok and consistent and r.verify_faulty_exit == 0
                failures += not ok
                lines.append(
                    f"| {name} | {every} | {sum(r.applied.values())} | {r.faulty_exit} "
                    f"| {len(r.pending)} | {r.verify_faulty_exit} | {r.recovery_polls} "
                    f"| {'yes' if r.equal else 'NO: ' + ', '.join(r.differs)} | {r.verify_exit} |"
                )
                print(json.dumps({**r.__dict__, "s": time.monotonic() - started}), flush=True)
    trials = len(EVERY) * len(content_faults(1))
    lines += [
        "",
        f"The clean run published {advisories} advisories. **{trials} trials, {failures} failed.**",
    ]
    return "\n".join(lines) + "\n"
