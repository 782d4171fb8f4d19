"""The KWOK stages that play kubelet for the real cluster's pods.

- `pod-stages.yaml`: a Job's pods (and, for both kinds, the image pull and the kill of a
  deleted pod), as KWOK reads it;
- `serve-stages.yaml`: pods with `restartPolicy: Always` (a Deployment's). Which of its stages
  applies, and when, is one jq program, `serve-step.jq`; its stages name the program's answer
  with the placeholders `SERVE_STEP` (a selector key: the step) and `SERVE_DUE` (a delay: when
  the step is due), which `serve_stages` fills in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
POD_STAGES = HERE / "pod-stages.yaml"
SERVE_STAGES = HERE / "serve-stages.yaml"
SERVE_STEP = HERE / "serve-step.jq"


def serve_stages() -> list[dict[str, Any]]:
    """The stages of `serve-stages.yaml` with `serve-step.jq` where they name it."""
    lines = SERVE_STEP.read_text().splitlines()
    program = "\n".join(line for line in lines if not line.startswith("#"))  # its header
    answers = {"SERVE_STEP": f"({program}) | .step", "SERVE_DUE": f"({program}) | .due"}
    stages = [doc for doc in yaml.safe_load_all(SERVE_STAGES.read_text()) if doc]
    for stage in stages:
        spec = stage["spec"]
        for expression in spec["selector"]["matchExpressions"]:
            expression["key"] = answers.get(expression["key"], expression["key"])
        duration = (spec.get("delay") or {}).get("durationFrom") or {}
        if "expressionFrom" in duration:
            duration["expressionFrom"] = answers[duration["expressionFrom"]]
    return stages


def pod_stage_files(directory: Path) -> list[Path]:
    """The pod stage files KWOK is to read, `serve_stages` written to `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    serving = directory / "serve-stages.yaml"
    serving.write_text(yaml.dump_all(serve_stages(), Dumper=_BlockDumper, sort_keys=False))
    return [POD_STAGES, serving]


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings (templates, the jq program) as `|` blocks, so the file reads."""


def _represent_str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_BlockDumper.add_representer(str, _represent_str)
