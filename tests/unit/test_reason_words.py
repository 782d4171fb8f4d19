"""Reasons speak to CLI and API users alike: a sentence that names an HTTP method also says
the `aicp` command that does the same (app/domain/classify/reasons.py)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.classify import reasons
from app.domain.classify.evidence import ClassifyContext
from tests.unit import test_classify, test_classify_start_deadline

HTTP_VERB = re.compile(r"\b(GET|HEAD|POST|PUT|PATCH|DELETE)\b")
CONTEXT = ClassifyContext(
    pool_name="h100-pool",
    accelerator_resource="nvidia.com/gpu",
    accelerators=8,
    cpu="32",
    memory="256Gi",
    start_deadline_seconds=600,
)


def bare_verbs(text: str) -> list[str]:
    """The HTTP methods a sentence names without the `aicp` command beside them."""
    return [] if "`aicp " in text else HTTP_VERB.findall(text)


def test_a_sentence_naming_a_method_alone_is_caught() -> None:
    assert bare_verbs("replace the workload (PUT) so it is admitted") == ["PUT"]
    assert bare_verbs("apply it again (`aicp apply`, or PUT of its spec)") == []


@pytest.mark.parametrize(
    "reason", [pytest.param(case.values[-1], id=case.id) for case in test_classify.CASES]
)
def test_no_workload_reason_names_a_bare_http_method(reason: str) -> None:
    assert bare_verbs(reason) == []


@pytest.mark.parametrize(("scenario", "reason"), test_classify_start_deadline.CASES)
def test_no_start_deadline_reason_names_a_bare_http_method(scenario: object, reason: str) -> None:
    built = scenario().build()  # type: ignore[operator]
    later = test_classify_start_deadline.AFTER + timedelta(seconds=1)
    assert bare_verbs(built.classify(now=later).reason) == []


# Kubernetes' own words (scheduler, kubelet, Kueue messages), without methods of their own.
MESSAGES = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=120
).filter(lambda text: not HTTP_VERB.search(text))
SCHEDULER = st.one_of(
    MESSAGES,
    st.sampled_from(
        [
            "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.",
            "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.",
            "0/2 nodes are available: 2 node(s) had untolerated taint {gpu: true}.",
        ]
    ),
)


@given(message=SCHEDULER, why=MESSAGES, image=MESSAGES)
def test_reasons_built_from_any_kubernetes_message_name_no_bare_http_method(
    message: str, why: str, image: str
) -> None:
    sentences = [
        reasons.unschedulable(CONTEXT, message),
        reasons.start_deadline_unschedulable(CONTEXT, message),
        reasons.start_deadline_image(CONTEXT, image, why, message),
        reasons.start_deadline_container(CONTEXT, why, message),
        reasons.start_deadline_waiting(CONTEXT, len(message) % 3),
        reasons.image_not_pulled(image, why, CONTEXT),
        reasons.container_not_created(why, message),
        reasons.waiting_for_quota(CONTEXT, message),
        reasons.not_admissible(CONTEXT, message),
        reasons.evicted(CONTEXT, why, message, requeued=bool(len(why) % 2)),
        reasons.failed(why, message),
    ]
    for text in sentences:
        assert bare_verbs(text) == [], text
