"""The page in a real browser (headless Chromium driven by selenium), as a user would use it:
start ``seqlab serve`` on a tiny trained run, type a sentence, wait for the translation, hover a
token and check where its attention lines go, toggle heads and check the drawing changes, and
save a screenshot.

Needs Debian's ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them); elsewhere the
test is skipped with the command that installs them. ``SEQLAB_SERVE_SCREENSHOT=docs/serve.png``
also writes the screenshot there (the README's picture), and ``SEQLAB_SERVE_RUN=RUN_DIR`` serves
that run instead of the tiny one.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
INSTALL = "apt-get install chromium chromium-driver (Debian/Ubuntu), then pip install selenium"


def _browser(profile: Path):
    if not (Path(CHROMIUM).is_file() and Path(CHROMEDRIVER).is_file()):
        pytest.skip(f"Chromium is not installed ({CHROMIUM}, {CHROMEDRIVER}): {INSTALL}")
    webdriver = pytest.importorskip("selenium.webdriver", reason=f"selenium is missing: {INSTALL}")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1280,1400",  # the whole page, no scrolling, in the screenshot
        f"--user-data-dir={profile}",
    ):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def _post(url: str, body: dict) -> dict:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


@pytest.fixture
def server(tiny_runs, tmp_path):
    run = os.environ.get("SEQLAB_SERVE_RUN") or str(tiny_runs["mt"])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SEQLAB_OFFLINE": "1"}
    argv = [sys.executable, "-m", "seqlab", "serve", f"dates={run}", "--port", str(port)]
    log = open(tmp_path / "server.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([*argv, "--engine", "seqlab", "--quiet"], env=env, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(400):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail("seqlab serve exited: " + (tmp_path / "server.log").read_text())
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def test_translate_and_explore_attention_in_chromium(server, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    driver = _browser(tmp_path / "profile")
    try:
        wait = WebDriverWait(driver, 20)
        driver.get(server)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#model option"))
        assert "transformer" in driver.find_element(By.ID, "model-info").text
        source = driver.find_element(By.ID, "source")
        source.clear()
        source.send_keys("saturday 9 may 1998")
        driver.find_element(By.ID, "translate").click()

        # the translation, each token shaded by its probability
        tokens = wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".tokens.output .tok"))
        assert tokens[-1].text == "<eos>"
        assert all(t.get_attribute("title").startswith("p = ") for t in tokens)
        assert "translated with seqlab" in driver.find_element(By.ID, "status").text
        explorer = driver.find_element(By.ID, "explorer")
        assert explorer.is_displayed() and "not explanations" in explorer.text
        kinds = [o.text for o in Select(driver.find_element(By.ID, "att-kind")).options]
        assert kinds == ["cross", "encoder", "decoder", "alignment"]

        svg = driver.find_element(By.ID, "att-lines")
        queries = svg.find_elements(By.CSS_SELECTOR, "text.query")
        keys = svg.find_elements(By.CSS_SELECTOR, "text.key")
        assert len(queries) == len(tokens) and [k.text for k in keys][-1] == "<eos>"
        assert int(svg.get_attribute("data-lines")) > 0

        # hovering an output token keeps its lines only, and highlights the tokens they reach
        ActionChains(driver).move_to_element(queries[0]).perform()
        wait.until(lambda d: int(svg.get_attribute("data-highlighted") or 0) > 0)
        lit = svg.find_elements(By.CSS_SELECTOR, "line.hl")
        assert lit and {line.get_attribute("data-q") for line in lit} == {"0"}
        faded = svg.find_elements(By.CSS_SELECTOR, "line.faded")
        assert all(line.get_attribute("data-q") != "0" for line in faded)
        assert "hl" in queries[0].get_attribute("class")
        reached = {line.get_attribute("data-k") for line in lit}
        lit_keys = {k.get_attribute("data-index") for k in keys if "hl" in k.get_attribute("class")}
        assert lit_keys == reached
        ActionChains(driver).move_to_element(driver.find_element(By.TAG_NAME, "h1")).perform()
        wait.until(lambda d: svg.get_attribute("data-highlighted") == "0")

        # the head toggles change what is drawn: lines, heatmaps and their total weight
        heads = driver.find_elements(By.CSS_SELECTOR, "#heads button")
        assert len(heads) >= 2
        before = (
            svg.get_attribute("data-weight"),
            len(driver.find_elements(By.CSS_SELECTOR, "#heatmaps canvas")),
        )
        heads[0].click()
        assert heads[0].get_attribute("aria-pressed") == "false"
        assert not svg.find_elements(By.CSS_SELECTOR, 'line[data-head="0"]')
        assert svg.find_elements(By.CSS_SELECTOR, 'line[data-head="1"]')
        after = (
            svg.get_attribute("data-weight"),
            len(driver.find_elements(By.CSS_SELECTOR, "#heatmaps canvas")),
        )
        assert after[1] == before[1] - 1 and after[0] != before[0]
        heads[0].click()
        assert svg.get_attribute("data-weight") == before[0]

        # the layers × heads grid: one thumbnail per layer and head; a click shows that one alone
        thumbnails = driver.find_elements(By.CSS_SELECTOR, "#grid canvas")
        layers = len(Select(driver.find_element(By.ID, "att-layer")).options)
        assert len(thumbnails) == layers * len(heads)
        thumbnails[1].click()  # layer 0, head 1
        pressed = [
            b.get_attribute("aria-pressed")
            for b in driver.find_elements(By.CSS_SELECTOR, "#heads button")
        ]
        assert pressed == ["false", "true"] + ["false"] * (len(heads) - 2)
        assert Select(driver.find_element(By.ID, "att-layer")).first_selected_option.text == "0"
        driver.find_element(By.ID, "heads-all").click()

        Select(driver.find_element(By.ID, "att-kind")).select_by_visible_text("cross")
        Select(driver.find_element(By.ID, "att-layer")).select_by_visible_text(str(layers - 1))
        ActionChains(driver).move_to_element(
            svg.find_elements(By.CSS_SELECTOR, "text.query")[1]
        ).perform()
        wait.until(lambda d: int(svg.get_attribute("data-highlighted") or 0) > 0)
        shot = tmp_path / "serve.png"
        assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
        if os.environ.get("SEQLAB_SERVE_SCREENSHOT"):
            shutil.copyfile(shot, os.environ["SEQLAB_SERVE_SCREENSHOT"])

        # beam, n-best and length penalty typed in: the page lists what the API answers
        for box, value in (("beam", "3"), ("nbest", "2"), ("length-penalty", "0")):
            field = driver.find_element(By.ID, box)
            field.clear()
            field.send_keys(value)
        driver.find_element(By.ID, "translate").click()
        items = wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".nbest li"))
        body = {"model": "dates", "text": "saturday 9 may 1998", "beam": 3, "nbest": 2}
        answer = _post(server + "/translate", {**body, "length_penalty": 0})
        hyps = answer["translations"][0]["hypotheses"]
        assert [i.find_element(By.CSS_SELECTOR, ".score").text for i in items] == [
            f"score {h['score']:.3f}" for h in hyps
        ]
        assert [h["score"] for h in hyps] == [h["log_prob"] for h in hyps]  # α = 0: raw

        # a character the model never saw: the page shows the API's warning, nothing silent
        source.clear()
        source.send_keys("saturday 9 may 1998 \u2603")
        driver.find_element(By.ID, "translate").click()
        notes = wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#output .note"))
        answer = _post(server + "/translate", {**body, "text": "saturday 9 may 1998 \u2603"})
        assert answer["warnings"] and "\u2603" in answer["warnings"][0]
        assert [n.text for n in notes] == answer["warnings"]
        errors = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
        assert not errors, errors
    finally:
        driver.quit()
