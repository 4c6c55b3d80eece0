"""The site's search from ``file://``, in headless Chromium, as a reader opening site/index.html.

Material's ``offline`` plugin writes the index as a script (``search/search_index.js``) and the
iframe-worker shim (``docs/assets/iframe-worker/``, ``extra.polyfills`` in mkdocs.yml) runs the
search worker in an iframe, since a page from ``file://`` may not start a Web Worker. On
``file://`` the index loads when the reader opens the search (a click on the search field), not
before: a script that fills the field without opening it sees "Initializing search" forever.

The test builds a one-page site with the real site's theme, search plugins and shim (seconds;
the real site's build is ``make docs``), opens it from ``file://``, clicks the field, types, and
reads the results. Needs Debian's ``chromium`` and ``chromium-driver`` and selenium; elsewhere it
is skipped with the command that installs them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
INSTALL = "apt-get install chromium chromium-driver (Debian/Ubuntu), then pip install selenium"


def site_config(docs: Path) -> dict:
    """The real mkdocs.yml's theme, search plugins and polyfills, for a site in ``docs``."""
    real = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=yaml.BaseLoader)
    plugins = [p for p in real["plugins"] if p in ("search", "offline")]
    assert plugins == ["search", "offline"], "the site's search plugins changed"
    return {
        "site_name": "search test",
        "docs_dir": str(docs),
        "site_dir": str(docs.parent / "site"),
        "use_directory_urls": False,
        "theme": {"name": "material", "font": False},
        "plugins": plugins,
        "extra": {"polyfills": real["extra"]["polyfills"]},
    }


def test_search_works_from_file_urls(tmp_path):
    if not (Path(CHROMIUM).is_file() and Path(CHROMEDRIVER).is_file()):
        pytest.skip(f"Chromium is not installed ({CHROMIUM}, {CHROMEDRIVER}): {INSTALL}")
    webdriver = pytest.importorskip("selenium.webdriver", reason=f"selenium is missing: {INSTALL}")
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs" / "assets" / "iframe-worker", docs / "assets" / "iframe-worker")
    (docs / "index.md").write_text("# Home\n\nNothing here.\n", encoding="utf-8")
    (docs / "other.md").write_text("# Other\n\nThe word zymurgy is here.\n", encoding="utf-8")
    config = tmp_path / "mkdocs.yml"
    config.write_text(yaml.safe_dump(site_config(docs)), encoding="utf-8")
    mkdocs = [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f", str(config)]
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    subprocess.run(mkdocs, check=True, env=env, timeout=120)
    assert (tmp_path / "site" / "search" / "search_index.js").is_file()

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--disable-background-networking", "--window-size=1280,900",
                f"--user-data-dir={tmp_path / 'profile'}"):  # fmt: skip
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        driver.get((tmp_path / "site" / "index.html").as_uri())
        field = driver.find_element(By.CSS_SELECTOR, "input.md-search__input")
        field.click()  # opening the search loads the index (file://: only then)
        field.send_keys("zymurgy")
        meta, found = "", []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            meta = driver.find_element(By.CSS_SELECTOR, ".md-search-result__meta").text
            found = driver.find_elements(By.CSS_SELECTOR, ".md-search-result__item a")
            if found:
                break
            time.sleep(0.2)
        assert found, f"no result from file:// after 60 s; the search says {meta!r}"
        assert found[0].get_attribute("href").endswith("other.html")
    finally:
        driver.quit()
