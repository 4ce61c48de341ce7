"""The Snakemake report page as a reader sees it: `snakemake --report` of a tiny cpu run, opened in headless
Chromium. The report is a single-page app (its results live in JavaScript and appear only when a category is
clicked), so a probe script clicks through the page's own menu like a reader would: every category, its first
folder, and the view buttons of its results until a figure shows; --dump-dom then returns what it found."""

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.pipeline

# The report's categories: the summary's and every experiment that reproduces a seed.
CATEGORIES = {"Summary", "conv2d", "tiling", "winograd_layers", "gemm"}

# Runs in the report page after it loads; writes what it saw as JSON into <pre id="report-probe">.
PROBE = """
(function () {
  const wait = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  const text = (node) => (node.textContent || "").trim();
  const menuItems = () => Array.from(document.querySelectorAll("nav li"));
  async function home() {  // the breadcrumbs' first link leads back to the main menu
    const crumb = document.querySelector("nav ol a");
    if (crumb) { crumb.click(); await wait(300); }
  }
  function shownFigure() {
    return Array.from(document.querySelectorAll("img")).find(
      (img) => !img.closest("nav") && (img.getAttribute("src") || "").startsWith("data:image/png"));
  }
  async function run() {
    const seen = { categories: [], visited: {} };
    await wait(1000);
    const items = menuItems();
    const start = items.findIndex((li) => text(li) === "Results");
    seen.categories = start < 0 ? [] : items.slice(start + 1).map(text);
    for (const category of seen.categories) {
      await home();
      const visit = { folders: [], rows: 0, figure: null };
      seen.visited[category] = visit;
      const link = menuItems().map((li) => li.querySelector("a")).find((a) => a && text(a) === category);
      if (!link) { continue; }
      link.click();
      await wait(300);
      if (!document.querySelector("nav tbody tr")) {  // several subcategories: open the first folder
        const folders = Array.from(document.querySelectorAll("nav ul a"));
        visit.folders = folders.map(text);
        if (folders.length) { folders[0].click(); await wait(300); }
      }
      const rows = Array.from(document.querySelectorAll("nav tbody tr"));
      visit.rows = rows.length;
      for (const row of rows) {
        const view = row.querySelector("td:last-child a");
        if (!view) { continue; }
        view.click();
        await wait(300);
        const img = shownFigure();
        if (img) {
          await wait(300);  // decoded: naturalWidth is the PNG's own width
          visit.figure = { row: text(row), width: img.naturalWidth, height: img.naturalHeight };
          break;
        }
      }
    }
    const out = document.createElement("pre");
    out.id = "report-probe";
    out.textContent = JSON.stringify(seen);
    document.body.appendChild(out);
  }
  window.addEventListener("load", () => { run(); });
})();
"""


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def report_html(request: pytest.FixtureRequest) -> Path:
    """The report of the session's tiny run (asked for after the check for Chromium: no run where
    the page cannot be rendered)."""
    if chromium() is None:
        pytest.skip("no chromium or chromium-browser binary on PATH: the report page cannot be rendered here")
    report = request.getfixturevalue("tiny_report") / "results/report.html"
    assert report.is_file() and report.stat().st_size > 0
    return report


@pytest.fixture(scope="module")
def probed(report_html: Path, tmp_path_factory) -> dict:
    """What the probe saw after clicking through the rendered page."""
    work = tmp_path_factory.mktemp("chromium")
    page = report_html.read_text()
    cut = page.rindex("</body>")
    probe_page = work / "report-probe.html"
    probe_page.write_text(page[:cut] + f"<script>{PROBE}</script>" + page[cut:])
    # --no-sandbox: the tests may run as root, where Chromium's sandbox refuses to start
    result = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                             f"--user-data-dir={work / 'profile'}", "--virtual-time-budget=20000", "--dump-dom",
                             probe_page.as_uri()], capture_output=True, text=True, timeout=180)
    found = re.search(r'<pre id="report-probe">(.*?)</pre>', result.stdout, re.S)
    assert found, f"the probe never reported (chromium exit {result.returncode}):\n{result.stderr[-3000:]}"
    return json.loads(html.unescape(found.group(1)))


def test_every_category_is_in_the_menu(probed):
    assert CATEGORIES <= set(probed["categories"]), probed["categories"]


@pytest.mark.parametrize("category", sorted(CATEGORIES))
def test_each_category_shows_a_figure(probed, category):
    visit = probed["visited"].get(category)
    assert visit is not None and visit["rows"] > 0, f"{category}: no results listed ({visit})"
    figure = visit["figure"]
    assert figure is not None, f"{category}: no result shows a figure ({visit})"
    # a decoded PNG of a real figure, not a broken image
    assert figure["width"] > 200 and figure["height"] > 100, figure
