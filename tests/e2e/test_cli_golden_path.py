"""The README's golden path with the command line only: its ```sh blocks, unchanged, run with
bash against `python -m app dev` (what `make run` starts), so the walkthrough stays true.

The `aicp` on the PATH is this virtual environment's console script; its contexts go to a
private config directory.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from tests.e2e.test_service_devmode import cli_golden_path_script, dev_process
from tests.support.cli import AICP

pytestmark = pytest.mark.timeout(120)


async def test_the_readme_golden_path_with_the_cli_only_works_against_dev_mode(
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
            }
        )
        shell = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            cli_golden_path_script(),
            cwd=tmp_path,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        output, _ = await asyncio.wait_for(shell.communicate(), 90)
    transcript = output.decode()

    assert shell.returncode == 0, transcript
    assert "Traceback" not in transcript
    config = tmp_path / ".config" / "aicp" / "config.yaml"
    assert config.stat().st_mode & 0o777 == 0o600
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
        assert expected in transcript, (expected, transcript)
    last_table = transcript.rsplit("NAME ", 1)[1]
    assert "train-7b" in last_table and "broken" not in last_table
