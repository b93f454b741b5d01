"""A person's view: a page opened twice in a real browser (headless Chromium) shows its count rise."""
import shutil

import pytest
from helpers import wait_for

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER),
                                reason="needs Debian's chromium and chromium-driver (make test installs them)")


@pytest.fixture
def browser(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={tmp_path}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)  # a page that never loads fails the test instead of hanging it
    driver.set_script_timeout(30)
    yield driver
    driver.quit()


def displayed_count(browser):
    from selenium.webdriver.common.by import By

    value = browser.find_element(By.ID, "visit-count").get_attribute("data-count")
    return int(value) if value else None


def test_a_page_opened_twice_shows_its_count_rise(stack, browser):
    url = f"{stack.base_url}/app?view=about_offices"
    before = stack.totals()["about_offices"]

    browser.get(url)
    from selenium.webdriver.common.by import By

    assert browser.title == "Offices · Institute for Public Research"
    assert browser.find_element(By.TAG_NAME, "h1").text == "Our offices"
    first = wait_for(lambda: displayed_count(browser), timeout=20, interval=0.2)
    assert first is not None and first >= before
    assert wait_for(lambda: stack.totals()["about_offices"] == before + 1, timeout=30)  # the visit was counted

    browser.get(url)
    # The page shows the total it read after registering its visit, then refreshes it.
    assert wait_for(lambda: (displayed_count(browser) or 0) > first, timeout=20, interval=0.2)
    assert wait_for(lambda: stack.totals()["about_offices"] == before + 2, timeout=30)
