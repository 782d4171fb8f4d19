"""The dashboard's inference services in a real browser (Debian's Chromium, headless, through
Playwright) against the full service on kubesim: the project page's services table changing
live, the service page's status, replica pods and followed logs, an editor scaling and
deleting, a viewer offered no write, a service pasted as YAML in the submit view, HTML shown
as text.
``AICP_UPDATE_SCREENSHOTS=1`` also writes the screenshots of docs/screenshots/."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import expect

from tests.e2e.test_dashboard import no_serious_violations, screenshot
from tests.support.browser import PHONE, new_page, record_states, sign_in, states_seen
from tests.support.scenario import NAMESPACE, POOL, PROJECT
from tests.support.service import RunningService


@pytest.fixture(autouse=True)
async def services_deleted(running_service: RunningService) -> AsyncIterator[None]:
    """Each test's services are deleted at its end, and waited for until gone: a page follows
    its replicas' logs, which kubesim serves until the replica's pod is gone."""
    yield
    scenario = running_service.scenario()
    listed = await scenario.request("GET", scenario.services, accept=(200, 404))
    names = [service["name"] for service in listed.json().get("items", [])]
    for name in names:
        await scenario.request("DELETE", f"{scenario.services}/{name}", accept=(202, 404))
    for name in names:
        await scenario.wait_absent(f"{scenario.services}/{name}", timeout=45)


SERVICE_YAML = """\
kind: Service
name: chat
compute_pool: h100-pool
image: ghcr.io/acme/serve:2.1
command: [python, -m, serve]
accelerators: 1
cpu: "4"
memory: 16Gi
replicas: 1
env:
  KUBESIM_LOG: "chat: serving on :8000"
labels:
  team: nlp
"""


async def test_the_project_page_lists_a_service_and_follows_its_state(
    browser: Any, running_service: RunningService, tmp_path: Path
) -> None:
    scenario = running_service.scenario()
    await scenario.setup_pool(accelerators=1)
    token = await scenario.token("viewer", name="vera")
    page = await new_page(browser)
    await record_states(page)
    await sign_in(page, running_service.url, token)
    await expect(page.locator("#services-empty")).to_be_visible()
    await page.evaluate("window.__sameDocument = true")

    # Two replicas of one GPU in a pool of one: the second waits for quota until it grows.
    await scenario.create_service("chat", accelerators=1, replicas=2)
    row = page.locator('#services tr[data-name="chat"]')
    await expect(row.locator("span.state")).to_have_text("PROGRESSING", timeout=30_000)
    await expect(row.locator("td.reason")).to_contain_text("1 waiting for quota in pool h100-pool")
    cells = row.locator("td")
    await expect(cells.nth(1)).to_have_text("1/2")
    await expect(cells.nth(3)).to_have_text(POOL)
    await expect(cells.nth(4)).to_have_text("1")
    await expect(cells.nth(5)).to_have_text(f"chat.{NAMESPACE}.svc:8000")
    await expect(page.locator("#services-empty")).to_be_hidden()
    await no_serious_violations(page)
    await screenshot(page, "project-services", tmp_path)

    await scenario.request(
        "PATCH", f"{scenario.pools}/{POOL}", json={"quota": scenario.quota(2)}, accept=(202,)
    )
    await expect(row.locator("span.state")).to_have_text("READY", timeout=30_000)
    await expect(cells.nth(1)).to_have_text("2/2")
    await expect(row.locator("td.reason")).to_contain_text("2 of 2 replicas ready")
    seen = await states_seen(page, "chat")
    assert seen[-2:] == ["PROGRESSING", "READY"], seen
    assert await page.evaluate("window.__sameDocument === true"), "the page was reloaded"
    link = row.get_by_role("link", name="chat")
    await expect(link).to_have_attribute("href", f"/projects/{PROJECT}/services/chat")


async def test_a_page_refused_the_services_stream_reads_the_list_again(
    browser: Any, running_service: RunningService
) -> None:
    scenario = running_service.scenario()
    await scenario.setup_pool(accelerators=2)
    token = await scenario.token("viewer", name="walt")
    page = await new_page(browser)
    too_many = {"type": "about:blank", "title": "Too Many Requests", "status": 429}

    async def refuse(route: Any) -> None:  # as the server refuses a token's stream beyond its limit
        await route.fulfill(status=429, json=too_many, content_type="application/problem+json")

    await page.route(lambda url: "/services?watch=true" in url, refuse)
    await sign_in(page, running_service.url, token)
    await expect(page.locator("#services-status")).to_have_text("Read again every 5 seconds.")

    await scenario.create_service("chat", accelerators=1)
    row = page.locator('#services tr[data-name="chat"]')
    await expect(row.locator("span.state")).to_have_text("READY", timeout=30_000)
    await expect(row.locator("td").nth(1)).to_have_text("1/1")


async def test_an_editor_creates_scales_and_deletes_a_service_from_its_page(
    browser: Any, running_service: RunningService, tmp_path: Path
) -> None:
    scenario = running_service.scenario()
    await scenario.setup_pool(accelerators=2)
    token = await scenario.token("editor", name="alice")
    page = await new_page(browser)
    await sign_in(page, running_service.url, token)

    await page.goto(f"{running_service.url}/projects/{PROJECT}/submit")
    await page.get_by_label("Workload spec (YAML or JSON)").fill(SERVICE_YAML)
    await page.get_by_role("button", name="Create from spec").click()
    await expect(page).to_have_url(f"{running_service.url}/projects/{PROJECT}/services/chat")
    created = await scenario.read_service("chat")
    assert created is not None and created["spec"]["labels"] == {"team": "nlp"}

    await expect(page.locator("#state")).to_have_text("READY", timeout=30_000)
    facts = page.locator("#facts")
    await expect(facts).to_contain_text(f"chat.{NAMESPACE}.svc:8000")
    await expect(facts).to_contain_text("1 of 1 desired")
    pods = page.locator("#pods tbody tr")
    await expect(pods).to_have_count(1)
    await expect(pods.first.locator("td").nth(0)).to_contain_text("gpu-node-")
    await expect(pods.first.locator("td").nth(2)).to_have_text("yes")
    await expect(page.locator("#spec")).to_contain_text("ghcr.io/acme/serve:2.1")
    await expect(page.locator("#events")).to_contain_text("token alice")
    await expect(page.locator("#logs")).to_have_text("chat: serving on :8000\n")

    replicas = page.get_by_label("Replicas", exact=True)
    await expect(replicas).to_have_value("1")
    await replicas.fill("2")
    await page.get_by_role("button", name="Scale").click()
    await expect(page.locator("#action-status")).to_contain_text("Scaled to 2 replicas")
    await expect(facts).to_contain_text("2 of 2 desired", timeout=30_000)
    await expect(pods).to_have_count(2)
    await expect(page.locator("#events")).to_contain_text("Scaled")
    await expect(page.locator("#events")).to_contain_text("2 of 2 replicas ready")
    # The follow starts again with both replicas, each line named by its pod.
    lines = page.locator("#logs")
    await expect(lines).to_contain_text(re.compile(r"\[chat-[a-z0-9-]+\] chat: serving on :8000"))
    await expect(page.locator("#log-pod option")).to_have_count(3)  # all, and each replica
    scaled = await scenario.read_service("chat")
    assert scaled is not None and scaled["spec"]["replicas"] == 2 and scaled["generation"] == 2
    await no_serious_violations(page)
    await screenshot(page, "service", tmp_path)

    await replicas.fill("65")
    await page.get_by_role("button", name="Scale").click()
    await expect(page.locator("#scale-error")).to_contain_text("replicas")
    await expect(replicas).to_have_attribute("aria-invalid", "true")

    await page.get_by_role("button", name="Delete", exact=True).click()
    await page.get_by_role("button", name="Confirm delete").click()
    await expect(page.locator("#gone")).to_contain_text("gone", timeout=45_000)
    await expect(page.get_by_role("button", name="Scale")).to_be_hidden()
    events = await scenario.service_events("chat") if await scenario.read_service("chat") else []
    assert all(e["actor"] != "admin" for e in events if e["type"] == "DeletionRequested")


async def test_a_viewer_is_offered_no_write_and_server_text_shows_as_text(
    browser: Any, running_service: RunningService, tmp_path: Path
) -> None:
    scenario = running_service.scenario()
    await scenario.setup_pool(accelerators=2)
    hostile = "<img src=x onerror=window.__pwned=1><b>bold</b>"
    await scenario.create_service("html-chat", command=[hostile], env={"KUBESIM_LOG": hostile})
    token = await scenario.token("viewer", name="vic")
    page = await new_page(browser)
    await sign_in(page, running_service.url, token)

    await page.goto(f"{running_service.url}/projects/{PROJECT}/services/html-chat")
    await expect(page.locator("#state")).to_have_text("READY", timeout=30_000)
    await expect(page.locator("#pods tbody tr")).to_have_count(1)
    await expect(page.locator("#spec")).to_contain_text(hostile)
    await expect(page.locator("#logs")).to_contain_text(hostile)
    assert await page.get_by_role("button", name="Scale").count() == 0
    assert await page.get_by_role("button", name="Delete").count() == 0
    assert await page.locator("#scale, #actions").count() == 0
    await no_serious_violations(page)
    # The server refuses a viewer's scale whatever a page offers.
    refused = await page.evaluate(
        """async () => {
          const csrf = document.querySelector('meta[name="csrf-token"]').content;
          const answer = await fetch(location.pathname.replace('/projects/', '/api/v1/projects/'),
            { method: 'PATCH', headers: { 'Content-Type': 'application/json',
              'X-CSRF-Token': csrf }, body: JSON.stringify({ replicas: 3 }) });
          return answer.status;
        }"""
    )
    assert refused == 403
    await scenario.submit("viewed", accelerators=0)  # a workload's page offers a viewer none
    await page.goto(f"{running_service.url}/projects/{PROJECT}/workloads/viewed")
    await expect(page.locator("#state")).not_to_be_empty()
    assert await page.locator("#delete, #replace").count() == 0
    narrow = await new_page(browser, PHONE)
    await sign_in(narrow, running_service.url, token)
    await narrow.goto(f"{running_service.url}/projects/{PROJECT}/services/html-chat")
    await expect(narrow.locator("#pods tbody tr")).to_have_count(1)
    await no_serious_violations(narrow)
    await screenshot(narrow, "service-phone", tmp_path)

    name = "<img src=x onerror=window.__pwned=1>"
    await page.goto(f"{running_service.url}/projects/{PROJECT}/services/{name}")
    await expect(page.locator("h1")).to_have_text(f"Service {name}")
    await expect(page.locator("#gone")).to_contain_text("not found")
    assert await page.locator("main img, main b").count() == 0
    assert await page.evaluate("window.__pwned === undefined")
