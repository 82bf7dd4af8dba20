"""The proxy's page in a real browser: Debian's headless Chromium driven by Playwright (the Python package, without
its own browser download). The page loads, shows a consumer's backlog, and its pause button pauses the consumer."""
from __future__ import annotations

import shutil

import pytest

from tests.proxy.conftest import ADMIN_TOKEN

CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed: pip install -e '.[test]' (the Python package; its browser "
                    "download is not needed)")
    path = shutil.which("chromium") or CHROMIUM
    if not shutil.which(path):
        pytest.fail("Chromium is not installed: apt-get install -y chromium (Debian's package)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=path, headless=True, args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()


def test_page_shows_the_backlog_and_pauses_a_consumer(proxies, browser):
    admin = proxies.admin(0)
    assert proxies.client(0).produce("page-writer", [{"value": f"p{i}"} for i in range(5)]).status == 200
    page = browser.new_page()
    page.on("dialog", lambda dialog: dialog.accept(ADMIN_TOKEN))      # the page asks for the admin token once
    page.goto(f"http://127.0.0.1:{proxies.ports[0]}/")
    section = page.locator('section[data-consumer="page-reader"]')
    section.locator(".status").filter(has_text="backlog 5").wait_for(timeout=20_000)
    assert section.locator("td.backlog").first.inner_text() == "5"
    section.locator('button[data-action="pause"]').click()
    section.locator(".status.paused").wait_for(timeout=20_000)
    assert admin.call("GET", "/admin/consumers/page-reader").json["paused"] is True
    assert proxies.client(1).message("page-reader").json["status"] == "paused"
    admin.call("POST", "/admin/consumers/page-reader/resume")
