"""The README followed top to bottom: the commands of its "Quick start", then the ```sh blocks
of "Run an inference service", "Golden path", "Quick start with curl" and "Golden path with
curl", unchanged and in that order, run with bash against one fresh `python -m app dev` (what
`make run` starts). Each
section has names of its own, so none trips over what an earlier one created.

The `aicp` on the PATH is this virtual environment's console script; its contexts go to a
private config directory. The quick start's `get workloads -w` runs until it shows the
workload SUCCEEDED, then is stopped as the reader would stop it with Ctrl-C.
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

import pytest

from tests.e2e.test_service_devmode import README, _blocks, console_commands, dev_process
from tests.support.cli import AICP

pytestmark = pytest.mark.timeout(240)

SECTIONS = [
    "## Quick start",
    "### Run an inference service",
    "## Golden path",
    "### Quick start with curl",
    "### Golden path with curl",
]
MARK = "=== README section: "


def followed(command: str) -> str:
    """A quick start command as bash runs it: a live watch (`-w`) is left running until it has
    shown the workload SUCCEEDED, then stopped."""
    command = re.sub(r"\s+#.*\Z", "", command)
    if not command.endswith(" -w"):
        return command
    return (
        f"{command} > watch.out &\nwatcher=$!\n"
        "until grep -q SUCCEEDED watch.out; do sleep 0.2; done\n"
        'kill "$watcher"; wait "$watcher" || true\ncat watch.out'
    )


def readme_script() -> str:
    text = README.read_text()
    quick = console_commands(text, SECTIONS[0])
    assert len(quick) >= 6, "the quick start lost its commands"
    parts = [f"echo '{MARK}{SECTIONS[0]}'", *(followed(c) for c in quick)]
    for heading, at_least in zip(SECTIONS[1:], (4, 6, 2, 6), strict=True):
        blocks = _blocks(text, heading)
        assert len(blocks) >= at_least, f"{heading} lost its code blocks"
        parts += [f"echo '{MARK}{heading}'", *blocks]
    return "set -euo pipefail\n" + "\n".join(parts)


async def test_the_readme_sections_run_in_order_against_one_fresh_dev_mode(
    tmp_path: Path, database_url: str
) -> None:
    async with dev_process(tmp_path, database_url) as dev:
        url = dev.banner("aicp is running (dev mode)")
        env = {k: v for k, v in os.environ.items() if not k.startswith("AICP_")}
        env.update(
            {
                "AICP": url,
                "PATH": f"{AICP.parent}:{env.get('PATH', '/usr/bin:/bin')}",
                "HOME": str(tmp_path),
                "XDG_CONFIG_HOME": str(tmp_path / ".config"),
                "PYTHONUNBUFFERED": "1",  # the watch's lines reach watch.out as printed
            }
        )
        shell = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            readme_script(),
            cwd=tmp_path,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        output, _ = await asyncio.wait_for(shell.communicate(), 200)
    transcript = output.decode()

    assert shell.returncode == 0, transcript
    assert "Traceback" not in transcript
    config = tmp_path / ".config" / "aicp" / "config.yaml"
    assert config.stat().st_mode & 0o777 == 0o600
    quick, service, golden, curl_quick, curl_golden = transcript.split(MARK)[1:]
    for expected in (
        "context 'admin' saved",
        "project/quickstart READY",
        "workload/first-job created",
    ):
        assert expected in quick, (expected, quick)
    # The watch's table, with the README's columns, until the workload succeeded.
    assert re.search(r"\nEVENT +NAME +STATE +POOL +GPUS +AGE +QUEUE +REASON\n", quick), quick
    assert re.search(r"\n(ADDED|MODIFIED) +first-job +SUCCEEDED +quick-pool +8 +", quick), quick
    for expected in (
        "service/chat created",
        "service/chat READY: 2 of 2 replicas ready on gpu-node-0, gpu-node-1.",
        "chat.aicp-quickstart.svc:8000",
        "service/chat scaled to 3 replicas (generation 2)",
        '"replicas":1',
        '"Scaled"',
        "service/chat deleted",
    ):
        assert expected in service, (expected, service)
    for expected in (
        "context 'admin' saved",
        "project/research READY",
        "pool/h100-pool READY",
        "workload/train-7b created",
        "epoch 1: loss 0.42\nepoch 2: loss 0.30\nepoch 3: loss 0.21\n",  # logs -f, in order
        "workload/train-7b SUCCEEDED",
        "Accelerator:  NVIDIA-H100-80GB-HBM3 x 8",  # describe: the evidence
        "EvidenceRecorded",  # describe: the event trail
        "exited with code 3",  # the failing workload's reason, from wait
        "broken did not succeed (exit status 1)",
        "workload/broken deleted",
    ):
        assert expected in golden, (expected, golden)
    last_table = golden.rsplit("NAME ", 1)[1]
    assert "train-7b" in last_table and "broken" not in last_table
    assert "204\n401\n" in curl_quick  # the quick start's token, revoked
    assert '"SUCCEEDED"' in curl_golden and '"DELETING"' in curl_golden
    assert curl_golden.rstrip().endswith('"Not found"')  # the deleted workload
    for earlier in (quick, service, golden, curl_quick, curl_golden):
        assert "already exists" not in earlier and '"status":409' not in earlier
