"""The whole book in the smoke profile: every chapter executes cleanly and the strict build passes."""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

import pytest

from helpers.core.env import REPO
from helpers.runner.execute import stderr_cells
from helpers.runner.profiles import CHAPTERS, toc_chapters


@pytest.mark.book
def test_book_builds_with_every_chapter(built_book):
    out, index = built_book
    assert index.is_file()
    for stem in toc_chapters():
        page = out / "_build" / "html" / CHAPTERS / f"{stem}.html"
        assert page.is_file(), f"{stem} was not rendered"
        nb = json.loads((out / CHAPTERS / f"{stem}.ipynb").read_text())
        errors = [o for c in nb["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
        assert not errors and not stderr_cells(out / CHAPTERS / f"{stem}.ipynb")
        assert nb["metadata"]["papermill"]["parameters"]["profile"] == "smoke"


@pytest.mark.book
def test_no_progress_bar_reaches_a_page(built_book):
    """tqdm bars drawn during the build would stay in the executed notebooks as stale widgets."""
    out, _ = built_book
    bar = re.compile(r"\|\s*\d+/\d+ \[|it/s\]")
    for stem in toc_chapters():
        nb = json.loads((out / CHAPTERS / f"{stem}.ipynb").read_text())
        views = [o["data"].get("text/plain", "") for c in nb["cells"] for o in c.get("outputs", [])
                 if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
        bars = [str(v)[:60] for v in views if bar.search(str(v))]
        assert not bars, f"{stem} keeps progress bars: {bars[:2]}"
        html = (out / "_build" / "html" / CHAPTERS / f"{stem}.html").read_text()
        assert not bar.search(html), f"{stem}'s page shows a progress bar"


@pytest.mark.book
def test_logit_lens_chapter_has_its_figure_and_numbers(built_book):
    out, _ = built_book
    html = (out / "_build" / "html" / CHAPTERS / "02_logit_lens.html").read_text()
    assert html.count("<img") >= 3  # the lens figure, the gold comparison and the token grid
    text = re.sub(r"<[^>]+>", "", html)
    text = " ".join(text.split())  # prose lines are wrapped in the source
    assert re.search(r"the effective depth is layer -?\d+", text)
    assert re.search(r"candidate cut points, counted as blocks kept, are therefore \S+", text)
    assert "Open this notebook in Jupyter to use it" in text  # the explorer becomes a note in a build


@pytest.mark.book
def test_run_configuration_page_lists_the_profile(built_book):
    out, _ = built_book
    page = (out / "_build" / "html" / "book" / "reproducibility.html").read_text()
    assert "smoke" in page and "02_logit_lens" in page
    chapters = json.loads((out / CHAPTERS / "run_config.json").read_text())["chapters"]
    # every chapter's kernel reported its peak memory (the instructor's page quotes it): more than a bare
    # Python with torch and a model (300 MiB), less than the machine
    assert all(300 < c["peak_mib"] < 24 * 1024 for c in chapters.values()), chapters
    # and the stored records it computed and reused, so the page says which times are times from empty
    assert all(c["computed"] + c["reused"] > 0 for c in chapters.values() if c["parameters"].get("models")), chapters
    assert "records computed / reused" in page


@pytest.mark.book
def test_every_record_the_book_computed_names_the_chapter_that_computed_it(built_book):
    """The runner tells each chapter's kernel its name, and the store writes it into each record's origin: a release
    batch counts its records by it (a later chapter reads and extends an earlier one's runs)."""
    out, _ = built_book
    chapters = json.loads((out / CHAPTERS / "run_config.json").read_text())["chapters"]
    said: dict[str, int] = {}
    for path in (out / "results").glob("*/*.jsonl"):
        for line in path.read_text().splitlines():
            chapter = json.loads(line)["origin"].get("chapter")
            said[chapter] = said.get(chapter, 0) + 1
    computed = {stem: c["computed"] for stem, c in chapters.items() if c["computed"]}
    assert said == computed, (said, computed)


@pytest.mark.book
def test_every_figure_shows_once_and_tables_render(built_book):
    out, _ = built_book
    for stem in toc_chapters():
        html = (out / "_build" / "html" / CHAPTERS / f"{stem}.html").read_text()
        images = re.findall(r'<img[^>]+src="([^"]+)"', html)
        repeated = {src[:80] for src in images if images.count(src) > 1}
        assert not repeated, f"{stem} shows a figure more than once: {sorted(repeated)[:2]}"
        text_paragraphs = re.findall(r"<p>(.*?)</p>", html, flags=re.S)
        raw_tables = [p[:80] for p in text_paragraphs if p.strip().startswith("|") and "|---" in p]
        assert not raw_tables, f"{stem} shows a Markdown table as text: {raw_tables[:1]}"
        main = html[html.find("<main"):]
        figures = [m.start() for m in re.finditer(r'<img[^>]+src="[^"]*_images/', main)]  # the chapter's own plots
        loose = [at for at in figures if main.rfind("<figure", 0, at) <= main.rfind("</figure>", 0, at)]
        captions = len(re.findall(r"<figcaption", main))
        assert figures and not loose and captions == len(figures), \
            f"{stem}: {len(loose)} of {len(figures)} figures without a number and caption"


@pytest.mark.book
def test_glued_values_are_written_as_data(built_book):
    out, _ = built_book
    rows = json.loads((out / CHAPTERS / "glued_values.json").read_text())
    names = {(r["chapter"], r["name"]) for r in rows}
    assert ("02_logit_lens", "ed_kl") in names and ("04_power_sampling", "verdict") in names
    assert all(not isinstance(r["value"], str) or not r["value"].startswith("<") for r in rows)
    page = (out / "_build" / "html" / "book" / "reproducibility.html").read_text()
    assert "ed_kl" in page


@pytest.mark.book
def test_chapter_04_names_only_the_depths_and_problem_counts_this_build_ran(built_book):
    """Sentences about depths come from the build's own parameters: a page of one profile never carries another
    profile's description (a sentence naming 23 of 24 blocks in a build of a 30-block model, say)."""
    out, _ = built_book
    html = (out / "_build" / "html" / CHAPTERS / "04_power_sampling.html").read_text()
    text = " ".join(re.sub(r"<[^>]+>", " ", html).split())
    ran = {(int(d), int(n)) for d, n in re.findall(r"\| \S+ \| (\d+)/(\d+) \|", html)} | {
        (int(d), int(n)) for d, n in re.findall(r"<td[^>]*>\s*(?:<p>)?(\d+)/(\d+)(?:</p>)?\s*</td>", html)}
    assert ran, "the methods table lists no depth"
    blocks = {n for _, n in ran}
    named = {(int(d), int(n)) for d, n in re.findall(r"\b(\d+) of (?:its |the )?(\d+) blocks", text)}
    named |= {(int(d), n) for d in re.findall(r"\bat (\d+) blocks", text) for n in blocks}
    stray = {(d, n) for d, n in named if n in blocks and (d, n) not in ran}
    assert not stray, f"chapter 04 names depths this build did not run: {sorted(stray)} (ran {sorted(ran)})"
    assert not ({n for _, n in named} - blocks), f"a model's depth this build did not run: {named}"


@pytest.mark.book
def test_cost_chapter_answers_its_three_questions(built_book):
    out, _ = built_book
    html = (out / "_build" / "html" / CHAPTERS / "05_cost.html").read_text()
    assert html.count("<img") >= 4  # token counts, FLOPs saved, accuracy at equal compute, net cost
    text = " ".join(re.sub(r"<[^>]+>", "", html).split())
    assert "the formula gives 8.84 extra tokens" in text and "The exact count of the same schedule is 13.5" in text
    assert re.search(r"a power-sampled answer decoded \d+ tokens on average", text)
    assert re.search(r"saves \d+\.\d% of its FLOPs per token", text)
    assert "cheapest first, among the methods run on all 3 problems, those that beat every cheaper one are" in text


@pytest.mark.book
def test_a_value_on_the_searches_subset_is_marked_wherever_it_stands_beside_the_others(built_book):
    """The smoke book runs SMC on the first 2 of its 3 problems (as the full book on 16 of 100): the methods table and
    the failure table mark it, chapter 05 keeps it off the front and compares it on its own problems, and the
    decomposition, whose methods all ran on every problem, has no mark; the front page answers with its table."""
    out, _ = built_book
    pages = {stem: " ".join(re.sub(r"<[^>]+>", " ", (out / "_build" / "html" / CHAPTERS / f"{stem}.html")
                                    .read_text()).split()) for stem in ("04_power_sampling", "05_cost")}
    four = pages["04_power_sampling"]
    assert "On the first 2 problems of the 3 (the searches" in four  # the page's apostrophes are curly
    assert re.search(r"smc † 2 \d+% ", four), "the failure table's SMC rows are marked, with their problem count"
    table = four[four.index("the cut (greedy at the cut"):four.index("Read across the")]
    assert "†" not in table and table.count("points [") == 10
    assert "SMC ran on the first 2 problems only, so it stands off the front" in pages["05_cost"]
    front = " ".join(re.sub(r"<[^>]+>", " ", (out / "_build" / "html" / "book" / "intro.html").read_text()).split())
    assert "Why. On smollm2-135m, the cut to" in front and front.index("What it costs.") < front.index("Why.")


@pytest.mark.book
def test_related_reading_cites_every_method(built_book):
    out, _ = built_book
    html = (out / "_build" / "html" / "book" / "related_reading.html").read_text()
    text = " ".join(re.sub(r"<[^>]+>", "", html).split())
    for name in ("LatentSeek", "HRPO", "LatentR³", "CoT2", "CoLaR", "CTRLS"):
        assert name in text
    assert "??" not in text and "{cite" not in text  # every citation resolved
    assert text.count(", 2025]") >= 6  # author-year citations rendered


@pytest.mark.book
def test_the_architecture_page_draws_the_layers_as_they_are(built_book):
    import helpers

    out, _ = built_book
    html = (out / "_build" / "html" / "book" / "architecture.html").read_text()
    assert html.count("<svg") == 1 and "layer-map" in html
    for package in (p for row in helpers.LAYERS for p in row):
        assert f"{package}/</text>" in html
    assert "run_programs" in html and "test_layers.py" in html


@pytest.mark.book
def test_a_chapter_page_shows_the_profiles_parameters_once(built_book):
    """The page shows the parameters the chapter ran with (the profile's), not the notebook's own cell beside."""
    import yaml

    out, _ = built_book
    html = (out / "_build" / "html" / CHAPTERS / "04_power_sampling.html").read_text()
    text = " ".join(re.sub(r"<[^>]+>", "", html).split())
    assert text.count("Parameters this page ran with (profile &#39;smoke&#39;)") + text.count(
        "Parameters this page ran with (profile 'smoke')") == 1
    assert "the literal values are the smoke profile" not in text
    assert "check_setup" not in text and "Binder guarantees" not in text  # the launch cell is for notebooks only
    profile = yaml.safe_load((REPO / "notebooks" / "profiles" / "smoke.yaml").read_text())
    assert f"max_new_tokens = {profile['parameters']['max_new_tokens']}" in text


@pytest.mark.book
def test_every_repository_and_launch_link_names_a_tracked_file(built_book):
    """Edit, source, Binder and Colab links lead to files git tracks (the chapters' notebooks/, not the generated
    copies)."""
    import subprocess
    from urllib.parse import parse_qs, unquote, urlparse

    from tests.conftest import BOOK_REPOSITORY

    tracked = set(subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                                 check=True).stdout.split())
    out, _ = built_book
    pages = sorted((out / "_build" / "html").rglob("*.html"))
    named: dict[str, set[str]] = {}
    for page in pages:
        for href in re.findall(r'href="([^"]+)"', page.read_text()):
            href = href.replace("&amp;", "&")
            if href.startswith(BOOK_REPOSITORY + "/"):
                rest = href[len(BOOK_REPOSITORY) + 1:]
                kind, _, path = rest.partition("/main/")
                if kind in ("edit", "blob"):
                    named.setdefault(kind, set()).add(unquote(path.split("?")[0]))
                else:
                    assert rest.startswith("issues/new?"), href
            elif href.startswith("https://mybinder.org/v2/gh/example-org/search-versus-depth/main?"):
                urlpath = parse_qs(urlparse(href).query)["urlpath"][0]
                assert urlpath.startswith("lab/tree/"), href
                named.setdefault("binder", set()).add(urlpath.removeprefix("lab/tree/"))
            elif href.startswith("https://colab.research.google.com/github/example-org/search-versus-depth/blob/main/"):
                named.setdefault("colab", set()).add(href.split("/blob/main/", 1)[1])
    assert named["edit"] >= {"book/intro.md", "notebooks/04_power_sampling.ipynb"}
    assert {f"notebooks/{s}.ipynb" for s in toc_chapters(REPO)} <= named["binder"]
    assert {f"notebooks/{s}.ipynb" for s in toc_chapters(REPO)} <= named["colab"]  # one click to Colab, per chapter
    for kind, paths in named.items():
        assert paths <= tracked, (kind, sorted(paths - tracked))


@pytest.mark.book
def test_each_chapter_links_its_notebook_as_a_student_runs_it(built_book):
    """The download link of each chapter gives its source notebook with the build's parameters written in (the
    smoke profile here) and no outputs."""
    out, _ = built_book
    html_root = out / "_build" / "html"
    for stem in toc_chapters():
        page = (html_root / CHAPTERS / f"{stem}.html").read_text()
        links = re.findall(rf'href="([^"]*_downloads/[^"]*/{stem}\.ipynb)"', page)
        assert links, f"{stem}: no download link to its notebook"
        nb = json.loads((html_root / CHAPTERS / links[0]).resolve().read_text())
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        assert not any(c.get("outputs") for c in code), stem
        injected = [c for c in code if "injected-parameters" in c["metadata"].get("tags", [])]
        assert injected and 'profile = "smoke"' in "".join(injected[0]["source"]), stem


@pytest.mark.book
def test_the_whole_book_is_one_pdf(built_book):
    """The book printed to one PDF from its single-page HTML build (skipped, loudly, without Chromium)."""
    from helpers.runner.pdf import PDF_NAME, browser

    out, _ = built_book
    if browser() is None:
        pytest.skip("NO PDF TEST: no Chromium on PATH (apt-get install chromium)")
    path = out / "_build" / "html" / PDF_NAME
    pdf = path.read_bytes()
    pages = len(re.findall(rb"/Type\s*/Page[^s]", pdf))
    assert pdf.startswith(b"%PDF-") and pdf.rstrip().endswith(b"%%EOF")
    assert pages >= 8 * len(toc_chapters()), pages  # every chapter, with its figures and exercises
    from pypdf import PdfReader

    texts = [unicodedata.normalize("NFKC", page.extract_text() or "") for page in PdfReader(path).pages]  # no ﬁ, ﬂ
    assert "Search versus Depth" in texts[0] and "Profile smoke" in texts[0]  # a title page with the build
    assert len(texts[0].split()) < 40  # ... and nothing else on it
    numbered = [i for i, text in enumerate(texts[1:], start=2) if re.search(rf"(^|\s){i}\s*$", text.strip())
                or re.search(rf"(^|\n){i}(\n|$)", text)]
    assert len(numbered) > 0.8 * (len(texts) - 1), f"{len(numbered)} of {len(texts) - 1} pages carry their number"
    assert not [i for i, text in enumerate(texts) if "Show code cell source" in text]  # no code toggles printed
    flat = [" ".join(text.split()) for text in texts]  # line breaks undone
    starts = {stem: [i for i, text in enumerate(flat) if " ".join(_title(stem).split()[:3]) in text[:120]]
              for stem in toc_chapters()}  # a chapter's title at the top of a page, under the running head
    assert all(starts.values()), {s: v for s, v in starts.items() if not v}  # every chapter begins a page
    assert max(text.count("04_power_sampling") for text in texts) < 8  # the glued-value table (a row per value,
    # its chapter in the first column) is a download, not pages of the PDF


def _title(stem: str) -> str:
    """A chapter's title, its notebook's first heading."""
    import json

    cells = json.loads((Path(__file__).resolve().parents[2] / "notebooks" / f"{stem}.ipynb").read_text())["cells"]
    first = next(c for c in cells if c["cell_type"] == "markdown" and "".join(c["source"]).lstrip().startswith("# "))
    return "".join(first["source"]).lstrip()[2:].splitlines()[0].strip()


@pytest.mark.book
def test_every_sentence_is_true_for_the_build_that_prints_it(built_book):
    """The class of the full build's false sentences, caught on a build whose settings differ from `full` (one model,
    N = 1, no span): each chapter's shown parameters are exactly those its run configuration lists (a literal over
    several lines included); no glued sentence names an embedded model the chapter did not run, or a number of MH
    steps it did not use; no exercise or sentence sets a setting against itself ("N = 1 instead of N = 1")."""
    import ast

    import nbformat

    from helpers.models.registry import KNOWN_MODELS

    out, _ = built_book
    config = json.loads((out / CHAPTERS / "run_config.json").read_text())["chapters"]
    rows = json.loads((out / CHAPTERS / "glued_values.json").read_text())
    for stem, chapter in config.items():
        nb = nbformat.read(out / CHAPTERS / f"{stem}.ipynb", as_version=4)
        shown = next(c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", []))
        values = {node.targets[0].id: ast.literal_eval(node.value) for node in ast.parse(shown.source).body
                  if isinstance(node, ast.Assign)}
        wrong = {k: (values.get(k), v) for k, v in chapter["parameters"].items() if values.get(k) != v}
        assert not wrong, (stem, wrong)  # (shown, ran): the run configuration lists what the profile set
        ran = set(values.get("models") or [])
        steps = values.get("mcmc_steps")
        for row in (r for r in rows if r["chapter"] == stem and isinstance(r["value"], str)):
            named = {m for m in KNOWN_MODELS if re.search(rf"(?<![\w.-]){re.escape(m)}(?![\w.-])", row["value"])}
            assert named <= (ran or set(KNOWN_MODELS)), (stem, row["name"], named - ran)
            if steps is not None:
                said = {int(n) for n in re.findall(r"\bN = (\d+)\b(?! steps per block tried)", row["value"])}
                assert said <= {steps, 0, *values.get("sweep_steps", []),
                                *([10, 4] if row["name"].startswith(("ex_", "steps_clause")) else [])}, \
                    (stem, row["name"], said)
    for page in sorted((out / "_build" / "html").rglob("*.html")):
        text = " ".join(re.sub(r"<[^>]+>", " ", page.read_text()).split())
        for setting in re.findall(r"(\b\w+ = [\d.]+)\b[^.;]{0,12}\binstead of\b[^.;]{0,12}", text):
            after = text[text.index(setting) + len(setting):][:80]
            assert f"instead of {setting}" not in after and f"instead of the build's {setting}" not in after, \
                (page.name, setting, after)
