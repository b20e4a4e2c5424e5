"""Write a screenshot of memorysync-local's web inspector (one user's page) for the docs.

Serves memorysync-local on loopback over a temporary database with a demo user,
signs in to ``/ui/`` in headless Chromium (Debian's ``chromium`` and
``chromium-driver``, driven by Selenium), opens the user and a transcript, and saves
a PNG. Not a test: it writes into the work tree.

Usage::

    python tools/inspector_screenshot.py                 # docs/img/inspector.png
    python tools/inspector_screenshot.py -o /tmp/ui.png

Needs ``memorysync-local`` and ``selenium`` in the interpreter, and
``apt-get install -y chromium chromium-driver`` (as root).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

DEMO_USER = "ana@example.com"
DEMO_TURNS = (
    ("autogen::monday", "user", "I live in Porto and I work as a nurse."),
    ("autogen::monday", "assistant", "Noted, thanks!"),
    ("autogen::monday", "user", "I am allergic to peanuts."),
    ("ag2::support", "user", "I prefer window seats on long flights."),
    ("ag2::support", "assistant", "I will keep that in mind."),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", default="docs/img/inspector.png", help="PNG to write")
    args = parser.parse_args(argv)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        print("needs Debian's chromium and chromium-driver (apt-get install -y chromium "
              "chromium-driver)", file=sys.stderr)  # fmt: skip
        return 2
    try:
        import httpx
        from selenium import webdriver
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait

        from memorysync_local import serve_in_thread
    except ImportError as exc:
        print(f"needs memorysync-local, httpx and selenium: {exc}", file=sys.stderr)
        return 2

    with tempfile.TemporaryDirectory() as folder:
        server = serve_in_thread(db_path=str(Path(folder) / "demo.db"))
        try:
            with httpx.Client(
                base_url=server.base_url, headers={"X-API-Key": server.api_key}
            ) as http:
                for session, role, text in DEMO_TURNS:
                    http.post(
                        "/v1/history/append",
                        json={"tenant_id": server.tenant_id, "user_id": DEMO_USER,
                              "session_id": session, "source": session.split("::")[0],
                              "turns": [{"role": role, "content": text}]},
                    ).raise_for_status()  # fmt: skip
            options = webdriver.ChromeOptions()
            options.binary_location = chromium
            for flag in ("--headless=new", "--no-sandbox", "--disable-background-networking",
                         "--window-size=1280,800", "--hide-scrollbars"):  # fmt: skip
                options.add_argument(flag)
            driver = webdriver.Chrome(
                options=options, service=webdriver.ChromeService(executable_path=driver_path)
            )
            try:
                wait = WebDriverWait(driver, 15)
                driver.get(server.base_url + "/ui/")
                driver.find_element(By.ID, "key").send_keys(server.api_key)
                driver.find_element(By.CSS_SELECTOR, "#signin button[type=submit]").click()
                wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#user-list a.user"))
                driver.find_element(By.CSS_SELECTOR, "#user-list a.user").click()
                wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#sessions tr.session a"))
                driver.find_element(By.CSS_SELECTOR, "#sessions tr.session a").click()
                wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#transcript .turn"))
                output = Path(args.output)
                output.parent.mkdir(parents=True, exist_ok=True)
                driver.save_screenshot(str(output))
            finally:
                driver.quit()
        finally:
            server.stop()
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
