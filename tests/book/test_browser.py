"""The built book as its readers see it: every page opened in headless Chromium.

Per page: every image loads, math is typeset from the book's own MathJax (no network), Markdown tables are
tables, no figure shows twice, no unresolved glue or citation is visible, every explorer note has its static
figure after it, and the console has no errors. A screenshot of each page goes to `_build/screenshots/`.

The smoke book of `make test` is checked by default; set SVD_BROWSER_BOOK to another `_build/html` folder (the
default build's, say) to check that one. Without Chromium the tests are skipped with a loud reason, or fail where
SVD_REQUIRE_BROWSER=1 (CI, whose `.ci/run` installs Chromium).
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import threading
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.book, pytest.mark.browser]

SKIP_PAGES = {"genindex.html", "search.html", "py-modindex.html"}
# What a sentence about an empty or degenerate quantity must never show (one pattern per line, kept beside this file)
BANNED = [re.compile(line) for line in (Path(__file__).with_name("banned_prose.txt")).read_text(encoding="utf-8")
          .splitlines() if line.strip() and not line.startswith("#")]


def _no_browser(reason: str):
    message = f"NO BROWSER TEST: {reason}. Install Chromium (apt-get install chromium chromium-driver) and selenium."
    if os.environ.get("SVD_REQUIRE_BROWSER") == "1":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def html_root(request) -> Path:
    given = os.environ.get("SVD_BROWSER_BOOK")
    if given:
        return Path(given)
    out, _ = request.getfixturevalue("built_book")
    return out / "_build" / "html"


@pytest.fixture(scope="module")
def server(html_root):
    handler = functools.partial(_QuietHandler, directory=str(html_root))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def browser():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _no_browser("selenium is not installed")
    from helpers.runner.pdf import browser as chromium

    binary = chromium()
    driver_path = shutil.which("chromedriver")
    if not binary or not driver_path:
        _no_browser("no chromium / chromedriver on PATH")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,2000"):
        options.add_argument(arg)
    options.set_capability("goog:loggingOptions", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    yield driver
    driver.quit()


def _pages(html_root: Path) -> list[str]:
    pages = [p.relative_to(html_root).as_posix() for p in html_root.rglob("*.html")
             if not {"_static", "_sources", "_images"} & set(p.relative_to(html_root).parts) and p.name not in SKIP_PAGES]
    return sorted(pages)


CHECKS = """
const out = {};
out.broken_images = [...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src.slice(-60));
const srcs = [...document.images].map(i => i.src);
out.repeated_images = [...new Set(srcs.filter((s, k) => srcs.indexOf(s) !== k))].map(s => s.slice(-60));
const main = document.querySelector('main') || document.body;
const text = main.innerText;
out.raw_math = (text.match(/\\\\\\(|\\\\\\[|\\$\\$/g) || []).length;
out.math_spans = document.querySelectorAll('span.math, div.math').length;
out.typeset = document.querySelectorAll('.MathJax, .MathJax_Display, .MathJax_CHTML, .MathJax_SVG').length;
out.raw_tables = [...main.querySelectorAll('p')].map(p => p.innerText.trim()).filter(t => t.startsWith('|') || /\\|\\s*[-\u2013\u2014]{1,3}\\s*\\|/.test(t)).map(t => t.slice(0, 60));
out.prose = [...main.querySelectorAll('p, li, td, th, figcaption, dd, .admonition-title')]
  .filter(e => !e.closest('pre, code, .cell_input, .highlight, .glued-values')).map(e => e.innerText);  // the glued values' table is data
out.links = [...document.querySelectorAll('a[href]')].map(a => a.href.split('#')[0])
  .filter(h => h.startsWith(location.origin));
out.unresolved = (text.match(/\\{glue[^}]*\\}|\\{cite[^}]*\\}|\\?\\?\\?|\\bglue:[a-z]+/g) || []);
out.notes_without_figure = [...main.querySelectorAll('div.cell')].filter(c => c.innerText.includes('Interactive explorer:')).filter(c => {
  let next = c.nextElementSibling;  // the static figure, maybe after a cell whose figure is glued (no output)
  while (next && next.matches('div.cell') && !next.querySelector('img, .cell_output *')) next = next.nextElementSibling;
  return !(next && next.querySelector('img'));
}).length;
return out;
"""


def _typeset(driver, timeout: float = 20.0) -> None:
    """Wait until MathJax has finished with the page (or the page has none)."""
    end = time.time() + timeout
    while time.time() < end:
        done = driver.execute_script(
            "return !window.MathJax || !MathJax.Hub || (MathJax.Hub.queue.pending === 0 && MathJax.Hub.queue.running === 0"
            " && document.readyState === 'complete');")
        if done:
            return
        time.sleep(0.25)


def test_every_page_renders_cleanly(browser, server, html_root):
    pages = _pages(html_root)
    assert any(p.startswith("book/chapters/") for p in pages), f"no chapter pages under {html_root}"
    shots = html_root.parent / "screenshots"
    shots.mkdir(exist_ok=True)
    problems, links = {}, set()
    for page in pages:
        browser.get(f"{server}/{page}")
        _typeset(browser)
        found = browser.execute_script(CHECKS)
        errors = [e["message"][:160] for e in browser.get_log("browser")
                  if e["level"] == "SEVERE" and "favicon" not in e["message"]]
        browser.save_screenshot(str(shots / (page.replace("/", "_").removesuffix(".html") + ".png")))
        links.update(found.pop("links"))
        prose = found.pop("prose")
        placeholders = sorted({m.group(0) for text in prose for pattern in BANNED for m in pattern.finditer(text)})
        bad = {k: v for k, v in found.items() if k not in ("math_spans", "typeset") and v}
        if placeholders:
            bad["placeholders"] = placeholders
        if found["math_spans"] and not found["typeset"]:
            bad["math_not_typeset"] = found["math_spans"]
        if errors:
            bad["console_errors"] = errors[:3]
        if bad:
            problems[page] = bad
    assert not problems, problems
    assert len(list(shots.glob("*.png"))) >= len(pages)
    broken = sorted(link for link in links if not _resolves(link))  # every page's links, downloads included
    assert not broken, f"{len(broken)} of {len(links)} links lead nowhere: {broken[:5]}"


def _resolves(url: str) -> bool:
    """Whether the book's own server answers `url` (a page, an image, a download) with a file."""
    import urllib.error
    import urllib.request

    try:  # HEAD: the file's existence, without sending it (a 5 MB PDF cut off mid-send breaks the server's pipe)
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=10) as reply:
            return reply.status == 200
    except (urllib.error.URLError, TimeoutError):
        return False


def test_a_removed_image_is_caught(browser, server, html_root, tmp_path):
    """The check above can fail: a page whose image file is gone reports it."""
    page = next(p for p in _pages(html_root) if p.startswith("book/chapters/"))
    browser.get(f"{server}/{page}")
    browser.execute_script("const i = document.images[0]; i.src = i.src + '.missing';")
    time.sleep(0.5)
    assert browser.execute_script(CHECKS)["broken_images"]


def test_a_cross_reference_leads_to_an_exercise_whose_solution_unfolds(browser, server):
    """As a student: follow the instructor page's link to an exercise, find its solution folded, open it, and
    read the build's numbers in it."""
    import re

    from selenium.webdriver.common.by import By

    browser.get(f"{server}/book/teaching.html")
    browser.find_element(By.CSS_SELECTOR, 'a[href$="04_power_sampling.html#ex-04-alpha-one"]').click()
    _wait(lambda: browser.current_url.endswith("04_power_sampling.html#ex-04-alpha-one"), "the link to open")
    _typeset(browser)
    exercise = browser.find_element(By.ID, "ex-04-alpha-one")
    assert "α = 1" in exercise.text
    solution = exercise.find_element(By.XPATH, "following::div[contains(@class, 'solution')][1]")
    body = solution.find_elements(By.CSS_SELECTOR, "p")[-1]
    assert not body.is_displayed(), "the solution should be folded until asked for"
    toggle = solution.find_elements(By.CSS_SELECTOR, "button.toggle-button") or solution.find_elements(
        By.CSS_SELECTOR, ".admonition-title")
    toggle[0].click()
    _wait(body.is_displayed, "the solution to unfold")
    assert re.search(r"\d\.\d{2}", solution.text), solution.text[:300]  # the glued acceptance rates
    assert "glue" not in solution.text


def _wait(condition, what: str, timeout: float = 10.0) -> None:
    end = time.time() + timeout
    while not condition():
        if time.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)
