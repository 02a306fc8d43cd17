"""Headless Chromium under Selenium, for the tests that open a page, and the screenshot of `python -m parity view`.

The browser and its driver are Debian's (`make browser` installs them), given explicitly, and Selenium Manager is kept
offline (SE_OFFLINE=true): nothing is downloaded when a test runs.

    python -m tests.support.browser PAGE.html OUT.png [--search TEXT]   # a screenshot of the page, 1400 x 900
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def missing() -> str | None:
    """Why no browser test can run here (a sentence), or None. Selenium is not asked: it comes with the test
    environment (the `browser` extra), and its absence beside a browser is an error, not a reason to skip."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.path.exists(path):
            return f"{path} is absent: run `make browser` (Debian's chromium and chromium-driver)"
    return None


def chromium(width: int = 1400, height: int = 900):
    """A headless Chromium WebDriver with its console log kept (driver.get_log('browser'))."""
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must not look for a driver online
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={width},{height}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)


def open_page(driver, path: str, timeout: float = 30.0) -> int:
    """Load a local page and wait for its `data-ready` mark; returns the mark (ms from navigation start)."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(pathlib.Path(path).resolve().as_uri())
    ready = WebDriverWait(driver, timeout).until(
        lambda d: d.find_element("tag name", "html").get_attribute("data-ready")
    )
    return int(ready)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.browser", description=__doc__.split("\n\n")[0])
    parser.add_argument("page")
    parser.add_argument("out")
    parser.add_argument("--search", default=None, help="type this into the page's search box first")
    args = parser.parse_args(argv)
    why = missing()
    if why:
        print(f"browser: {why}", file=sys.stderr)
        return 2
    driver = chromium()
    try:
        ready = open_page(driver, args.page)
        if args.search:
            box = driver.find_element("id", "search")
            box.send_keys(args.search)
            driver.implicitly_wait(1)
            driver.execute_script("return new Promise(r => setTimeout(r, 400))")
        driver.save_screenshot(args.out)
    finally:
        driver.quit()
    print(f"wrote {args.out} (ready at {ready} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
