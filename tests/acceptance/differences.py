"""Compare what aicp observed of each acceptance scenario on kubesim and on the real cluster.

`make test` records, per scenario and cluster, the state, reason sentence, exit code, attempts
and event types of every workload (and the state, reason, replica counts and event types of
every service, as `service/<name>`) (`.aicp/observations/<cluster>/<test>.json`, names, uids,
nodes and durations normalised). This prints every field that differs:

    .venv/bin/python -m tests.acceptance.differences
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.acceptance.conftest import OBSERVATIONS


def differences(simulated: dict[str, Any], real: dict[str, Any]) -> list[str]:
    found = []
    for workload in sorted(set(simulated) | set(real)):
        ours, theirs = simulated.get(workload), real.get(workload)
        if ours is None or theirs is None:
            found.append(f"{workload}: only on {'real' if ours is None else 'kubesim'}")
            continue
        for field in sorted(set(ours) | set(theirs)):
            if ours.get(field) != theirs.get(field):
                found.append(
                    f"{workload}.{field}:\n    kubesim: {ours.get(field)!r}\n"
                    f"    real:    {theirs.get(field)!r}"
                )
    return found


def main() -> int:
    simulated_dir, real_dir = OBSERVATIONS / "kubesim", OBSERVATIONS / "real"
    tests = sorted(
        {p.name for p in simulated_dir.glob("*.json")} & {p.name for p in real_dir.glob("*.json")}
    )
    if not tests:
        print(f"no scenario observed on both clusters under {OBSERVATIONS}; run `make test`")
        return 1
    count = 0
    for name in tests:
        found = differences(_load(simulated_dir / name), _load(real_dir / name))
        count += len(found)
        for line in found:
            print(f"{name.removesuffix('.json')}: {line}")
    print(f"{count} differences in {len(tests)} scenarios")
    return 0


def _load(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


if __name__ == "__main__":
    sys.exit(main())
