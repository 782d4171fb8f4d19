"""The web dashboard in a real browser (Debian's Chromium, headless, through Playwright) against
the full service on kubesim: sign in, submit through the form, watch the row change live,
the workload's timeline, evidence and followed logs, delete; tenancy; errors beside their
fields; HTML shown as text; axe-core on every view. ``AICP_UPDATE_SCREENSHOTS=1`` also writes
the screenshots of docs/screenshots/."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx
from playwright.async_api import expect

from tests.support.browser import (
    PHONE,
    axe_violations,
    new_page,
    record_states,
    sign_in,
    states_seen,
)
from tests.support.scenario import PROJECT
from tests.support.service import RunningService
from tests.support.waiting import wait_until

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


async def screenshot(page: Any, name: str, tmp_path: Path) -> None:
    """Every view is photographed; into docs/screenshots/ when asked to update them."""
    directory = SCREENSHOTS if os.environ.get("AICP_UPDATE_SCREENSHOTS") == "1" else tmp_path
    directory.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(directory / f"{name}.png"), full_page=True)


async def no_serious_violations(page: Any) -> None:
    violations = await axe_violations(page)
    assert violations == [], json.dumps(violations, indent=1)


async def test_submit_watch_open_and_delete_a_workload_in_the_browser(
    browser: Any, running_service: RunningService, tmp_path: Path
) -> None:
    scenario = running_service.scenario()
    await scenario.setup_pool(accelerators=8)
    # A workload holding the whole pool for a while: the one submitted next waits in QUEUED.
    await scenario.submit("holder", env={"KUBESIM_RUN_SECONDS": "8"})
    token = await scenario.token("editor", name="alice")

    table = await new_page(browser)
    await record_states(table)
    await sign_in(table, running_service.url, token)
    await expect(table).to_have_url(f"{running_service.url}/projects/{PROJECT}")
    await expect(table.locator("#live-status")).to_contain_text("Live")
    await table.evaluate("window.__sameDocument = true")

    form = await table.context.new_page()
    await form.goto(f"{running_service.url}/projects/{PROJECT}/submit")
    await expect(form.locator("#f-compute_pool option")).to_have_count(1)
    await form.get_by_label("Name", exact=True).fill("dash-train")
    await form.get_by_label("Image").fill("ghcr.io/acme/train:1.4")
    await form.get_by_label("Command").fill("python train.py --epochs 3")
    await form.get_by_label("GPUs per replica").fill("8")
    await form.get_by_label("CPU per replica").fill("8")
    await form.get_by_label("Memory per replica").fill("64Gi")
    extra = {"env": {"KUBESIM_RUN_SECONDS": "3", "KUBESIM_LOG": "dash-train: step 1 loss 0.42"}}
    await form.get_by_label("More fields").fill(json.dumps(extra))
    await no_serious_violations(form)
    await screenshot(form, "submit", tmp_path)
    await form.get_by_role("button", name="Submit").click()
    await expect(form).to_have_url(f"{running_service.url}/projects/{PROJECT}/workloads/dash-train")

    row = table.locator('tr[data-name="dash-train"]')
    await expect(row).to_have_count(1)
    await screenshot(table, "project", tmp_path)
    await no_serious_violations(table)
    await expect(row.locator("span.state")).to_have_text("SUCCEEDED", timeout=45_000)
    seen = await states_seen(table, "dash-train")
    assert [s for s in seen if s in ("QUEUED", "RUNNING", "SUCCEEDED")] == [
        "QUEUED",
        "RUNNING",
        "SUCCEEDED",
    ], seen
    assert await table.evaluate("window.__sameDocument === true"), "the table was reloaded"
    await expect(row.locator("td").nth(5)).to_contain_text("gpu-node")  # the node column

    # The workload view (opened before it ran) followed it: timeline, evidence, logs, events.
    await expect(form.locator("#state")).to_have_text("SUCCEEDED", timeout=20_000)
    timeline = form.locator("#timeline")
    await expect(timeline).to_contain_text("queued")
    await expect(timeline).to_contain_text("running")
    await expect(timeline).to_contain_text("succeeded")
    await expect(form.locator("#evidence")).to_contain_text("NVIDIA-H100-80GB-HBM3")
    await expect(form.locator("#evidence")).to_contain_text("Exit code")
    await expect(form.locator("#logs")).to_contain_text("dash-train: step 1 loss 0.42")
    await expect(form.locator("#events")).to_contain_text("token alice")
    await no_serious_violations(form)
    await screenshot(form, "workload", tmp_path)

    await form.get_by_role("button", name="Delete", exact=True).click()
    await form.get_by_role("button", name="Confirm delete").click()
    await expect(form.locator("#gone")).to_contain_text("gone", timeout=30_000)
    await expect(row).to_have_count(0, timeout=10_000)
    events = await scenario.events("dash-train") if await scenario.workload("dash-train") else []
    assert all(e["actor"] != "admin" for e in events if e["type"] == "DeletionRequested")

    narrow = await new_page(browser, PHONE)
    await sign_in(narrow, running_service.url, token)
    await expect(narrow.locator('tr[data-name="holder"]')).to_have_count(1)
    await no_serious_violations(narrow)
    await screenshot(narrow, "project-phone", tmp_path)


async def test_a_project_token_sees_only_its_own_project(
    browser: Any, running_service: RunningService
) -> None:
    mine = running_service.scenario()
    await mine.setup_pool(accelerators=8)
    other = running_service.scenario().for_project("vision")
    await other.create_project("vision")
    token = await mine.token("viewer", name="reader")

    page = await new_page(browser)
    await sign_in(page, running_service.url, token)
    await expect(page.locator("#live-status")).to_contain_text("Live")
    answers = await page.evaluate(
        """async () => {
          const list = await fetch('/api/v1/projects/vision/workloads');
          const live = await fetch('/projects/vision/live?after=0');
          const feed = await fetch('/projects/vision/position');
          const projects = await (await fetch('/api/v1/projects')).json();
          return [list.status, live.status, feed.status, projects.items.map(p => p.name)];
        }"""
    )
    assert answers == [404, 404, 404, [PROJECT]]
    response = await page.goto(f"{running_service.url}/projects/vision")
    assert response is not None and response.status == 404
    response = await page.goto(f"{running_service.url}/admin")
    assert response is not None and response.status == 403
    # A viewer's write is refused by the server, whatever the page offers.
    await page.goto(f"{running_service.url}/projects/{PROJECT}/submit")
    await page.get_by_label("Name", exact=True).fill("not-allowed")
    await page.get_by_label("Image").fill("ghcr.io/acme/train:1.4")
    await page.get_by_role("button", name="Submit").click()
    await expect(page.locator("#form-errors")).to_contain_text("editor")


async def test_errors_show_beside_their_fields_and_html_renders_as_text(
    browser: Any, running_service: RunningService, tmp_path: Path
) -> None:
    scenario = running_service.scenario()
    await scenario.setup_pool(accelerators=8)
    token = await scenario.token("editor", name="bob")
    hostile = "<img src=x onerror=window.__pwned=1><b>bold</b>"
    await scenario.submit(
        "html-run",
        command=[hostile],
        env={"KUBESIM_RUN_SECONDS": "0.3", "KUBESIM_LOG": hostile},
    )
    await scenario.wait_state("html-run", "SUCCEEDED")

    page = await new_page(browser)
    await page.goto(f"{running_service.url}/")
    await no_serious_violations(page)
    await screenshot(page, "sign-in", tmp_path)
    await page.get_by_label("API token").fill("aicp_not-a-real-token-at-all-000000000000000000")
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.locator("#token-error")).to_contain_text("not valid")

    await sign_in(page, running_service.url, token)
    await page.goto(f"{running_service.url}/projects/{PROJECT}/workloads/html-run")
    await expect(page.locator("#spec")).to_contain_text(hostile)
    await expect(page.locator("#logs")).to_contain_text(hostile)
    assert await page.locator("main img, main b").count() == 0
    assert await page.evaluate("window.__pwned === undefined")

    await page.goto(f"{running_service.url}/projects/{PROJECT}/submit")
    await page.get_by_label("Name", exact=True).fill("Bad_Name")
    await page.get_by_label("Image").fill("ghcr.io/acme/train:1.4")
    await page.get_by_label("GPUs per replica").fill("1000")
    await page.get_by_role("button", name="Submit").click()
    await expect(page.locator("#e-name")).to_contain_text("name")
    await expect(page.locator("#e-accelerators")).to_contain_text("accelerators")
    await expect(page.get_by_label("Name", exact=True)).to_have_attribute("aria-invalid", "true")
    await no_serious_violations(page)


async def test_admin_view_creates_a_token_shown_once_and_revokes_it(
    browser: Any, running_service: RunningService, tmp_path: Path
) -> None:
    scenario = running_service.scenario()
    await scenario.setup_pool(accelerators=8)
    page = await new_page(browser)
    await sign_in(page, running_service.url, running_service.service.settings.admin_token)
    await expect(page).to_have_url(f"{running_service.url}/admin")
    await expect(page.locator("#projects")).to_contain_text(PROJECT)
    await expect(page.locator("#bindings")).to_contain_text("8 GPUs granted")
    await page.get_by_label("Token name").fill("ci-bot")
    await page.get_by_role("button", name="Create token").click()
    secret = (await page.locator("#secret code").text_content() or "").strip()
    assert secret.startswith("aicp_")
    await expect(page.locator("#tokens")).to_contain_text("ci-bot")
    await no_serious_violations(page)
    await screenshot(page, "admin", tmp_path)
    async with httpx.AsyncClient(base_url=running_service.url) as client:
        headers = {"Authorization": f"Bearer {secret}"}
        assert (await client.get(f"/api/v1/projects/{PROJECT}", headers=headers)).status_code == 200
        await page.get_by_role("button", name="Revoke token ci-bot").click()
        await expect(page.locator("#tokens tr", has_text="ci-bot")).to_contain_text("revoked")
        assert (await client.get(f"/api/v1/projects/{PROJECT}", headers=headers)).status_code == 401


async def test_session_cookie_is_httponly_strict_and_writes_need_the_csrf_header(
    running_service: RunningService,
) -> None:
    scenario = running_service.scenario()
    await scenario.setup_pool(accelerators=8)
    token = await scenario.token("editor", name="carol")
    async with httpx.AsyncClient(base_url=running_service.url) as client:
        signed = await client.post("/sign-in", data={"token": token})
        assert signed.status_code == 303
        cookie = signed.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and token not in cookie
        page = await client.get(f"/projects/{PROJECT}")
        assert token not in page.text
        assert "unsafe-inline" not in page.headers["content-security-policy"]
        assert "<script>" not in page.text and " style=" not in page.text
        body = scenario.workload_body("by-cookie")
        refused = await client.post(f"/api/v1/projects/{PROJECT}/workloads", json=body)
        assert refused.status_code == 403 and refused.json()["type"].endswith("csrf-rejected")
        csrf = page.text.split('name="csrf-token" content="', 1)[1].split('"', 1)[0]
        accepted = await client.post(
            f"/api/v1/projects/{PROJECT}/workloads", json=body, headers={"X-CSRF-Token": csrf}
        )
        assert accepted.status_code == 202, accepted.text
        assert accepted.json()["created_by"].startswith("token:")
        foreign = await client.post(
            "/sign-in", data={"token": token}, headers={"Origin": "https://evil.example"}
        )
        assert foreign.status_code == 403
        out = await client.post("/sign-out", data={"csrf": csrf})
        assert out.status_code == 303
        assert (await client.get(f"/api/v1/projects/{PROJECT}/workloads")).status_code == 401


async def test_pool_cards_show_cpu_and_memory_in_use_beside_the_gpus(
    browser: Any, running_service: RunningService
) -> None:
    scenario = running_service.scenario()
    await scenario.setup_pool(accelerators=16)
    await scenario.start_running("busy", cpu="8", memory="64Gi")

    async def counted() -> bool:
        usage = (await scenario.pool())["status"]["usage"]
        return bool(usage["cpu_admitted"] == "8" and usage["memory_admitted"] == str(64 * 2**30))

    await wait_until(counted, timeout=30, message="Kueue's cpu and memory in use on the pool")
    token = await scenario.token("viewer", name="carol")
    page = await new_page(browser)
    await sign_in(page, running_service.url, token)
    await expect(page).to_have_url(f"{running_service.url}/projects/{PROJECT}")

    card = page.locator("article.pool")
    await expect(card.get_by_label("GPUs in use: 8 of 16")).to_have_attribute("value", "8")
    await expect(card.get_by_label("cpu in use: 8 of 256")).to_have_attribute("value", "8")
    memory = card.get_by_label("Memory in use: 64Gi of 2048Gi")
    await expect(memory).to_have_attribute("max", str(2 * 2**40))
    await no_serious_violations(page)


async def test_the_name_filter_asks_the_server_and_keeps_to_live_changes(
    browser: Any, running_service: RunningService
) -> None:
    scenario = running_service.scenario()
    await scenario.setup_pool(accelerators=16)
    for name in ("train-a", "eval-a", "pretrain-b"):
        await scenario.submit(name, accelerators=0)
    token = await scenario.token("viewer", name="dora")
    page = await new_page(browser)
    await sign_in(page, running_service.url, token)
    await expect(page.locator("#live-status")).to_contain_text("Live")
    rows = page.locator("#workloads tbody tr")
    await expect(rows).to_have_count(3)

    async with page.expect_request(lambda r: "name_contains=TRAIN" in r.url):
        await page.get_by_label("Name contains").fill("TRAIN")
    await expect(rows).to_have_count(2)
    await expect(page.locator("#live-status")).to_contain_text("Live")
    await scenario.submit("eval-b", accelerators=0)
    await scenario.submit("train-c", accelerators=0)
    await expect(page.locator('tr[data-name="train-c"]')).to_have_count(1)
    names = await page.locator("#workloads tbody tr th").all_inner_texts()
    assert names == ["train-c", "pretrain-b", "train-a"]

    await page.get_by_label("Name contains").fill("50%_off")
    await expect(page.locator("#empty")).to_be_visible()
    await expect(rows).to_have_count(0)
    await no_serious_violations(page)


SPEC_YAML = """\
# pasted from a repository
name: yaml-run
compute_pool: h100-pool
image: ghcr.io/acme/train:1.4
command: [python, train.py]
accelerators: 0
env:
  KUBESIM_RUN_SECONDS: "0.3"
  WANDB_MODE: offline
labels:
  team: vision
"""


async def test_a_yaml_spec_pasted_in_the_submit_view_creates_the_workload(
    browser: Any, running_service: RunningService
) -> None:
    scenario = running_service.scenario()
    await scenario.setup_pool(accelerators=8)
    token = await scenario.token("editor", name="erin")
    page = await new_page(browser)
    await sign_in(page, running_service.url, token)
    await page.goto(f"{running_service.url}/projects/{PROJECT}/submit")
    editor = page.get_by_label("Workload spec (YAML or JSON)")
    create = page.get_by_role("button", name="Create from spec")

    await editor.fill("name: broken\nimage: [unclosed\n")
    await create.click()
    await expect(page.locator("#e-spec")).to_contain_text("not valid YAML at line 3")
    await expect(editor).to_have_attribute("aria-invalid", "true")
    await editor.fill(SPEC_YAML.replace("image: ghcr.io/acme/train:1.4\n", ""))
    await create.click()
    await expect(page.locator("#e-spec")).to_contain_text("image:")
    await no_serious_violations(page)
    assert await scenario.workload("broken") is None
    assert await scenario.workload("yaml-run") is None  # nothing created on either error

    await editor.fill(SPEC_YAML)
    await create.click()
    await expect(page).to_have_url(f"{running_service.url}/projects/{PROJECT}/workloads/yaml-run")
    created = await scenario.workload("yaml-run")
    assert created is not None
    assert created["spec"]["env"]["WANDB_MODE"] == "offline"
    assert created["spec"]["labels"] == {"team": "vision"}
    assert created["created_by"].startswith("token:")


async def test_the_spec_reader_refuses_what_is_not_a_plain_spec_with_a_sentence(
    running_service: RunningService,
) -> None:
    scenario = running_service.scenario()
    await scenario.setup_pool(accelerators=8)
    token = await scenario.token("viewer", name="fay")
    read = f"/projects/{PROJECT}/spec-text"
    async with httpx.AsyncClient(base_url=running_service.url) as client:
        await client.post("/sign-in", data={"token": token})
        page = await client.get(f"/projects/{PROJECT}/submit")
        csrf = page.text.split('name="csrf-token" content="', 1)[1].split('"', 1)[0]
        assert (await client.post(read, content="name: x\n")).status_code == 403  # no CSRF
        headers = {"X-CSRF-Token": csrf, "Content-Type": "text/plain"}

        async def sentence(text: str | bytes, status: int = 422) -> str:
            response = await client.post(read, content=text, headers=headers)
            assert response.status_code == status, response.text
            detail: str = response.json()["detail"]
            return detail

        ok = await client.post(read, content='{"name": "j", "cpu": "2"}', headers=headers)
        assert ok.json() == {"spec": {"name": "j", "cpu": "2"}}
        assert "not valid JSON at line 1" in await sentence('{"name": ')
        assert "aliases" in await sentence("a: &x [1, 2]\nb: *x\n")
        assert "a list, not a mapping" in await sentence("- name: x\n")
        assert "empty" in await sentence("  \n")
        assert "not UTF-8" in await sentence(b"name: \xff\n")
        assert "at most 65536" in await sentence("# " + "x" * 70_000, status=413)
        assert (await client.get(f"/api/v1/projects/{PROJECT}/workloads")).json()["items"] == []
