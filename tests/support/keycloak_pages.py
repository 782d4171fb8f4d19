"""Keycloak's sign-in pages driven with plain form posts, as a person's browser would submit
them (no JavaScript is needed by the login, consent and device pages)."""

from __future__ import annotations

import html
import re
from urllib.parse import urljoin, urlsplit

import httpx

_FORM = re.compile(r"<form[^>]*\baction=\"([^\"]+)\"", re.IGNORECASE)
_HIDDEN = re.compile(r"<input[^>]*type=\"hidden\"[^>]*name=\"([^\"]+)\"[^>]*value=\"([^\"]*)\"")


def _form(page: httpx.Response, having: str) -> tuple[str, dict[str, str]]:
    """The action and hidden fields of the page's form that has a field named `having`."""
    for chunk in page.text.split("<form")[1:]:
        body = chunk.split("</form>", 1)[0]
        found = _FORM.search("<form" + body)
        if found is None or f'name="{having}"' not in body:
            continue
        fields = {name: html.unescape(value) for name, value in _HIDDEN.findall(body)}
        return urljoin(str(page.url), html.unescape(found.group(1))), fields
    raise AssertionError(f"no form with {having!r} on {page.url}: {page.text[:300]}")


def _cookies(browser: httpx.Client) -> dict[str, str]:
    # Keycloak marks its cookies Secure on 127.0.0.1 (a secure context to browsers); Python's
    # cookie jar would not send them over http, a browser does.
    return {"Cookie": "; ".join(f"{c.name}={c.value}" for c in browser.cookies.jar)}


def _get(browser: httpx.Client, url: str) -> httpx.Response:
    return _follow(browser, browser.get(url, headers=_cookies(browser)))


def _post(
    browser: httpx.Client, url: str, data: dict[str, str], stop_at: str | None = None
) -> httpx.Response:
    return _follow(browser, browser.post(url, data=data, headers=_cookies(browser)), stop_at)


def _follow(
    browser: httpx.Client, response: httpx.Response, stop_at: str | None = None
) -> httpx.Response:
    """Follow redirects one by one, each hop sending the cookies set so far; a redirect to a
    path `stop_at` is answered as it is (not followed)."""
    for _ in range(20):
        if not response.is_redirect:
            return response
        location = urljoin(str(response.url), response.headers["location"])
        if stop_at is not None and urlsplit(location).path == stop_at:
            return response
        response = browser.get(location, headers=_cookies(browser))
    raise AssertionError(f"too many redirects from {response.url}")


def sign_in(
    browser: httpx.Client, url: str, username: str, password: str, stop_at: str | None = None
) -> httpx.Response:
    """Open `url` (an authorization or device URL), submit the login form, and grant consent
    when asked; the last answer (redirects followed, except one to the path `stop_at`: that
    redirect is the answer). `browser` must not follow redirects."""
    page = _get(browser, url)
    action, fields = _form(page, "username")
    fields = {**fields, "username": username, "password": password}
    page = _post(browser, action, fields, stop_at)
    if 'name="accept"' in page.text:  # the consent page of the device grant
        action, fields = _form(page, "accept")
        page = _post(browser, action, {**fields, "accept": "Yes"})
    return page
