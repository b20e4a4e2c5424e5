"""The web inspector (``/ui/``) in a real headless Chromium, driven by Selenium.

Debian's ``chromium`` with ``chromium-driver`` (same version). Without them the
tests skip and say why; with ``CI=true`` a missing browser fails the run.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from memorysync_core import MemorySyncAPI, UserMemory

USER = "anaïs@example.com"  # not ASCII: never sent in a header by the page
SCRIPT_FACT = "I live in Porto <script>window.__pwned = 1</script>."
TURNS = (
    ("autogen::monday", SCRIPT_FACT),
    ("autogen::monday", "I am allergic to peanuts."),
    ("autogen::friday", 'I love <img src="x" onerror="window.__pwned = 2"> jazz.'),
)


def _missing(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and the inspector's browser test cannot run: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from selenium import webdriver
    except ImportError:
        _missing("selenium is not installed (pip install selenium)")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        _missing("Debian's chromium and chromium-driver are not installed "
                 "(apt-get install -y chromium chromium-driver, as root)")  # fmt: skip
    options = webdriver.ChromeOptions()
    options.binary_location = str(chromium)
    for flag in ("--headless=new", "--no-sandbox", "--disable-background-networking",
                 "--disable-dev-shm-usage", "--window-size=1280,900"):  # fmt: skip
        options.add_argument(flag)
    service = webdriver.ChromeService(executable_path=str(driver_path))
    driver = webdriver.Chrome(options=options, service=service)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def served(make_local_server: Callable[..., Any]) -> Any:
    srv = make_local_server(served=True)
    with httpx.Client(base_url=srv.base_url, headers={"X-API-Key": srv.api_key}) as http:
        for session, text in TURNS:
            answer = http.post(
                "/v1/history/append",
                json={"tenant_id": "local", "user_id": USER, "session_id": session,
                      "source": "autogen", "turns": [{"role": "user", "content": text}]},
            )  # fmt: skip
            assert answer.status_code == 200, answer.text
    return srv


def api_export(srv: Any) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        api = MemorySyncAPI(base_url=srv.base_url, api_key=srv.api_key)
        memory = UserMemory(api, user_id=USER, session_id="x", surface="autogen")
        try:
            return await memory.export()
        finally:
            await memory.aclose()

    return asyncio.run(run())


def wait_for(driver: Any, condition: Callable[[Any], Any]) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, 15).until(condition)


def sign_in(driver: Any, srv: Any) -> None:
    from selenium.webdriver.common.by import By

    driver.get(srv.base_url + "/ui/")
    driver.execute_script("sessionStorage.clear()")
    driver.get(srv.base_url + "/ui/")
    driver.find_element(By.ID, "key").send_keys(srv.api_key)
    driver.find_element(By.CSS_SELECTOR, "#signin button[type=submit]").click()
    wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#user-list li"))


def test_sign_in_find_a_fact_escape_and_delete_a_session(browser: Any, served: Any) -> None:
    from selenium.webdriver.common.by import By

    before = api_export(served)
    sign_in(browser, served)
    # The key lives in the tab only: not in the URL, not in a cookie.
    assert served.api_key not in browser.current_url
    assert browser.get_cookies() == []
    assert browser.execute_script("return sessionStorage.getItem('memorysync-local.key')") == (
        served.api_key
    )

    # The users list counts what the API's export counts.
    [row] = browser.find_elements(By.CSS_SELECTOR, "#user-list li")
    assert row.get_attribute("data-user") == USER
    turns = sum(len(t) for t in before["transcripts"].values())
    assert row.find_element(By.CSS_SELECTOR, ".counts").text == (
        f"{len(before['memories'])} memories, {turns} turns, {len(before['sessions'])} sessions"
    )

    row.find_element(By.CSS_SELECTOR, "a.user").click()
    wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#memories tr.memory"))
    texts = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#memories td.text")]
    assert "Allergic to peanuts" in texts
    assert "Lives in Porto <script>window.__pwned = 1</script>" in texts  # shown as text
    assert browser.find_element(By.ID, "memory-count").get_attribute("data-total") == str(
        len(before["memories"])
    )

    # Search narrows the list; delete that one memory (confirmed).
    browser.find_element(By.ID, "search").send_keys("peanut")
    # Each keystroke searches: wait for the list of the whole word (an earlier list may
    # show one row too, and be replaced under the click).
    wait_for(
        browser, lambda d: d.find_element(By.ID, "memories").get_attribute("data-query") == "peanut"
    )
    assert len(browser.find_elements(By.CSS_SELECTOR, "#memories tr.memory")) == 1
    browser.find_element(By.CSS_SELECTOR, "#memories tr.memory button").click()
    browser.switch_to.alert.accept()
    wait_for(browser, lambda d: not d.find_elements(By.CSS_SELECTOR, "#memories tr.memory"))
    assert "Allergic to peanuts" not in [m["text"] for m in api_export(served)["memories"]]

    # A transcript in order, its markup as text, nothing executed.
    browser.find_element(By.CSS_SELECTOR, 'tr.session[data-session="autogen::friday"] a').click()
    wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#transcript .turn"))
    [turn] = browser.find_elements(By.CSS_SELECTOR, "#transcript .turn .content")
    assert turn.text == TURNS[2][1]
    assert browser.find_elements(By.CSS_SELECTOR, "#transcript img, #memories script") == []
    assert browser.execute_script("return window.__pwned === undefined")

    # Delete one session (confirmed) and see it gone, here and in the API.
    browser.find_element(
        By.CSS_SELECTOR, 'tr.session[data-session="autogen::monday"] button'
    ).click()
    browser.switch_to.alert.accept()
    wait_for(
        browser,
        lambda d: not d.find_elements(
            By.CSS_SELECTOR, 'tr.session[data-session="autogen::monday"]'
        ),
    )
    after = api_export(served)
    assert after["sessions"] == ["autogen::friday"]
    assert [m["text"] for m in after["memories"]] == [
        'Loves <img src="x" onerror="window.__pwned = 2"> jazz'
    ]
    assert browser.execute_script("return window.__pwned === undefined")


def test_a_users_export_downloads_as_json(browser: Any, served: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    browser.execute_cdp_cmd(
        "Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(tmp_path)}
    )
    expected = api_export(served)
    sign_in(browser, served)
    browser.find_element(By.CSS_SELECTOR, "#user-list a.user").click()
    wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#memories tr.memory"))
    browser.find_element(By.ID, "export-user").click()

    # The user id is not ASCII and has an @: the file name keeps what is safe.
    saved = tmp_path / "memorysync-export-ana_s@example.com.json"
    wait_for(browser, lambda d: saved.exists())
    data = json.loads(saved.read_text("utf-8"))
    assert data["schema"] == expected["schema"]
    assert data["user_id"] == USER
    assert data["sessions"] == expected["sessions"]
    assert data["transcripts"] == expected["transcripts"]
    assert sorted(m["text"] for m in data["memories"]) == sorted(
        m["text"] for m in expected["memories"]
    )
    assert SCRIPT_FACT in [t["content"] for t in data["transcripts"]["autogen::monday"]]
    turns = sum(len(t) for t in expected["transcripts"].values())
    assert browser.find_element(By.ID, "export-status").text == (
        f"Saved {saved.name}: {len(expected['memories'])} memories, {turns} turns, "
        f"{len(expected['sessions'])} sessions."
    )
    # The key went in a header only: no URL the page opened carries it.
    urls = browser.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
    )
    assert any("/x-local/v1/export" in u for u in urls)
    assert not any(served.api_key in u for u in urls)
    assert browser.execute_script("return window.__pwned === undefined")


def test_a_wrong_key_is_refused_in_a_sentence_and_signs_out(browser: Any, served: Any) -> None:
    from selenium.webdriver.common.by import By

    browser.get(served.base_url + "/ui/")
    browser.execute_script("sessionStorage.clear()")
    browser.get(served.base_url + "/ui/")
    browser.find_element(By.ID, "key").send_keys("ms_wrong")
    browser.find_element(By.CSS_SELECTOR, "#signin button[type=submit]").click()
    wait_for(browser, lambda d: d.find_element(By.ID, "error").text)
    error = browser.find_element(By.ID, "error").text
    assert error.startswith("That key was not accepted.")
    for raw in ("401", "X-API-Key", "/x-local"):
        assert raw not in error
    assert browser.find_element(By.ID, "signin").is_displayed()
    assert not browser.find_element(By.ID, "app").is_displayed()
    assert browser.execute_script("return sessionStorage.getItem('memorysync-local.key')") is None

    # The right key then signs in and clears the sentence.
    sign_in(browser, served)
    assert browser.find_element(By.ID, "error").text == ""
