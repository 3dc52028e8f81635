"""Issue 50's before/after evidence for one built book: every problem the browser test's checks find, page by page,
every link that leads nowhere (the test itself stops at its first failed assertion), and screenshots of four pages
at the places the issue names.

    .venv/bin/python reviews/issue-50/compare.py /tmp/smoke_old/_build/html /tmp/shots/before
"""

from __future__ import annotations

import functools
import http.server
import json
import shutil
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: helpers and the tests

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from helpers.runner.run import browser as chromium
from tests.book import test_browser as checks

# (file name, page, what to scroll to: text of a caption, table, paragraph or heading; IMG0 the first image; None
# the top), window height
SHOTS = [
    ("front_page", "book/intro.html", None, 1100),
    ("ch02_benchmark_table", "book/chapters/02_logit_lens.html", "How hard the benchmark is", 900),
    ("ch04_comparison_table", "book/chapters/04_power_sampling.html", "better / worse", 900),
    ("ch05_figure", "book/chapters/05_cost.html", "IMG0", 900),
]
SCROLL = """
const t = arguments[0];
const els = [...document.querySelectorAll('main figcaption, main table, main p, main h2, main h3')];
const e = t === 'IMG0' ? document.querySelector('main img') : els.find(x => x.innerText.includes(t));
if (!e) return false;
e.scrollIntoView({block: 'start'});
window.scrollBy(0, e.tagName === 'IMG' ? -60 : -80);
return e.tagName;
"""


def problems(driver, url: str, root: Path) -> tuple[dict, list[str], int]:
    """What the browser test's per-page checks find on each page, and the links that lead nowhere."""
    found_on, links = {}, set()
    for page in checks._pages(root):
        driver.get(f"{url}/{page}")
        checks._typeset(driver)
        found = driver.execute_script(checks.CHECKS)
        links.update(found.pop("links"))
        prose = found.pop("prose")
        bad = {k: v for k, v in found.items() if k not in ("math_spans", "typeset") and v}
        placeholders = sorted({m.group(0) for text in prose for p in checks.BANNED for m in p.finditer(text)})
        if placeholders:
            bad["placeholders"] = placeholders
        if bad:
            found_on[page] = bad
    broken = sorted(link.removeprefix(url) for link in links if not checks._resolves(link))
    return found_on, broken, len(links)


def main(root: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    handler = functools.partial(checks._QuietHandler, directory=str(root))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    options = webdriver.ChromeOptions()
    options.binary_location = chromium()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,2000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        found_on, broken, n_links = problems(driver, url, root)
        print(json.dumps(found_on, indent=1, ensure_ascii=False))
        print(f"{len(broken)} of {n_links} links lead nowhere: {json.dumps(broken, indent=1)}")
        for name, page, target, height in SHOTS:
            driver.set_window_size(1280, height)
            driver.get(f"{url}/{page}")
            checks._typeset(driver)
            if target and not driver.execute_script(SCROLL, target):
                print(f"{name}: {target!r} not found on {page}")
            time.sleep(0.5)
            driver.save_screenshot(str(out / f"{name}.png"))
    finally:
        driver.quit()
        httpd.shutdown()


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
