"""The dashboard's "Sign in with single sign-on" against the real Keycloak of this tier.

In a browser (Chromium through Playwright): carol, in vision-observers, clicks the button,
fills Keycloak's login form and lands on project vision as a viewer, seeing only what her
group's binding allows; signing out ends her session. Without a browser (plain HTTP, as
Keycloak's pages are driven in test_cli_login.py): the callback's failures — the provider's
error, an attempt this browser never started, a state that does not match, a code used
already, a person with no role binding — each end on the sign-in page with a sentence.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
from playwright.async_api import expect

from app.main import Service
from tests.support.api_client import ADMIN_TOKEN
from tests.support.browser import axe_violations, new_page
from tests.support.keycloak_pages import sign_in as keycloak_sign_in

CALLBACK = "/sign-in/sso/callback"


async def _world(service: Service) -> None:
    """Projects vision and language, a pool each; vision-observers view vision."""
    async with httpx.AsyncClient(
        base_url=service.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=60
    ) as admin:
        binding = {"resource_name": "nvidia.com/gpu", "flavor": "h100-80g", "node_labels": {}}
        put = await admin.put("/api/v1/accelerator-bindings/h100-80g", json=binding)
        assert put.status_code == 201, put.text
        for project in ("vision", "language"):
            made = await admin.post("/api/v1/projects", json={"name": project})
            assert made.status_code == 202, made.text
            pool = {
                "name": f"{project}-pool",
                "accelerator_class": "h100-80g",
                "quota": {"accelerators": 8, "cpu": "64", "memory": "512Gi"},
            }
            made = await admin.post(f"/api/v1/projects/{project}/compute-pools", json=pool)
            assert made.status_code == 202, made.text
        for group, role, project in (
            ("vision-observers", "viewer", "vision"),
            ("language-team", "admin", "language"),
        ):
            body = {"group": group, "role": role, "project": project}
            made = await admin.post("/api/v1/role-bindings", json=body)
            assert made.status_code == 201, made.text


async def test_a_person_signs_in_to_the_dashboard_through_keycloak(
    browser: Any, sso_service: Service
) -> None:
    await _world(sso_service)
    url = sso_service.url
    page = await new_page(browser)
    await page.goto(f"{url}/")
    assert await axe_violations(page) == []
    await page.get_by_role("link", name="Sign in with single sign-on").click()

    # Keycloak's own login page.
    await page.locator("#username").fill("carol")
    await page.locator("#password").fill("carol-password")
    await page.locator("#kc-login").click()

    await expect(page).to_have_url(f"{url}/projects/vision")
    await expect(page.locator(".who")).to_have_text("carol · viewer")
    await expect(page.locator("#pool-vision-pool")).to_have_text("vision-pool")
    await expect(page.get_by_role("link", name="Admin")).to_have_count(0)
    seen = await page.evaluate(
        """async () => {
          const projects = await (await fetch('/api/v1/projects')).json();
          const other = await fetch('/api/v1/projects/language/workloads');
          const write = await fetch('/api/v1/projects/vision/compute-pools', {
            method: 'POST',
            headers: {
              'Content-Type': 'application/json',
              'X-CSRF-Token': document.querySelector('meta[name=csrf-token]').content,
            },
            body: JSON.stringify({name: 'more', accelerator_class: 'h100-80g',
                                  quota: {accelerators: 1, cpu: '1', memory: '1Gi'}}),
          });
          return [projects.items.map(p => p.name), other.status, write.status];
        }"""
    )
    assert seen == [["vision"], 404, 403]
    response = await page.goto(f"{url}/projects/language")
    assert response is not None and response.status == 404
    response = await page.goto(f"{url}/admin")
    assert response is not None and response.status == 403

    # The same session cookie as a token's sign-in.
    cookies = await page.context.cookies()
    session = next(c for c in cookies if c["name"] == "aicp_session")
    assert session["httpOnly"] and session["sameSite"] == "Strict"

    await page.goto(f"{url}/projects/vision")
    await page.get_by_role("button", name="Sign out").click()
    await expect(page).to_have_url(f"{url}/sign-in")
    answer = await page.evaluate("async () => (await fetch('/api/v1/projects')).status")
    assert answer == 401
    await page.goto(f"{url}/projects/vision")
    await expect(page).to_have_url(f"{url}/sign-in")


def _error_of(answer: httpx.Response) -> str:
    found = re.search(r'<p id="sso-error"[^>]*>([^<]*)</p>', answer.text)
    assert found is not None, answer.text[:500]
    return found.group(1).replace("&#39;", "'")


async def _started(browser: httpx.AsyncClient) -> str:
    """Press the button: the authorization URL (the attempt's cookie is now in `browser`)."""
    answer = await browser.get("/sign-in/sso")
    assert answer.status_code == 303, answer.text
    assert answer.cookies.get("aicp_sign_on")
    location = answer.headers["location"]
    query = parse_qs(urlsplit(location).query)
    assert query["code_challenge_method"] == ["S256"] and query["nonce"] and query["state"]
    return location


async def test_the_callback_refuses_with_a_sentence_on_the_sign_in_page(
    sso_service: Service,
) -> None:
    async with httpx.AsyncClient(base_url=sso_service.url, timeout=60) as browser:
        # The provider's error (the person pressed Cancel, or the client is not allowed).
        answer = await browser.get(
            CALLBACK, params={"error": "access_denied", "error_description": "User cancelled"}
        )
        assert answer.status_code == 400
        assert _error_of(answer) == "The identity provider did not sign you in: User cancelled."

        # A callback this browser never started (no attempt cookie).
        answer = await browser.get(CALLBACK, params={"code": "abc", "state": "xyz"})
        assert answer.status_code == 400
        assert "not started in this browser" in _error_of(answer)

        # Started here, but the state that comes back is another one.
        await _started(browser)
        answer = await browser.get(CALLBACK, params={"code": "abc", "state": "forged"})
        assert answer.status_code == 400
        assert "state mismatch" in _error_of(answer)
        assert "aicp_session" not in answer.cookies

        # The sign-on button is on the page each error ends on.
        assert "Sign in with single sign-on" in answer.text


async def _keycloak_round(
    keycloak_browser: httpx.Client, aicp: httpx.AsyncClient, user: str
) -> tuple[httpx.Response, str, str]:
    """Start at aicp, sign in on Keycloak's pages; the callback's answer, its URL and the
    attempt cookie that went with it."""
    location = await _started(aicp)
    attempt = aicp.cookies["aicp_sign_on"]
    back = keycloak_sign_in(keycloak_browser, location, user, f"{user}-password", stop_at=CALLBACK)
    callback = back.headers["location"]
    assert callback.startswith(f"{sso_url(aicp)}{CALLBACK}?"), callback
    return await aicp.get(callback), callback, attempt


def sso_url(aicp: httpx.AsyncClient) -> str:
    return str(aicp.base_url).rstrip("/")


async def test_a_used_code_and_a_person_without_a_binding_are_refused(
    sso_service: Service,
) -> None:
    await _world(sso_service)
    with httpx.Client(timeout=60, follow_redirects=False) as keycloak_browser:
        async with httpx.AsyncClient(base_url=sso_service.url, timeout=60) as aicp:
            finished, callback, attempt = await _keycloak_round(keycloak_browser, aicp, "carol")
            assert finished.status_code == 200, finished.text
            assert "Signed in as carol" in finished.text
            assert aicp.cookies.get("aicp_session")
            home = await aicp.get("/")
            assert home.status_code == 303 and home.headers["location"] == "/projects/vision"

            # The same code again (what an expired code also gets): refused by Keycloak.
            aicp.cookies.set("aicp_sign_on", attempt)
            again = await aicp.get(callback)
            assert again.status_code == 401
            assert _error_of(again) == (
                "The identity provider did not accept the sign-in's code: it has expired or "
                "was used already. Sign in again."
            )

    with httpx.Client(timeout=60, follow_redirects=False) as keycloak_browser:
        async with httpx.AsyncClient(base_url=sso_service.url, timeout=60) as aicp:
            finished, _, _ = await _keycloak_round(keycloak_browser, aicp, "erin")
            assert finished.status_code == 403
            assert _error_of(finished).startswith(
                "Signed in as erin, with no groups in the token: no role binding matches"
            )
            assert "aicp_session" not in aicp.cookies
