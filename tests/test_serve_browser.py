"""The page in a real browser (headless Chromium driven by selenium), as a user would use it:
start ``seqlab serve`` on tiny trained runs of every task, type a sentence, wait for the
translation, hover a token and check where its attention lines go, toggle heads and check the
drawing changes, and save a screenshot; classify texts and an image, generate text as it streams
in, forecast from typed values and from a CSV file, each checked against the API's answer to the
same request; and the form the page builds from a route's request schema when a task ships no
panel script.

Needs Debian's ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them); elsewhere the
tests are skipped with the command that installs them. ``SEQLAB_SERVE_SCREENSHOT=docs/serve.png``
also writes the translation's screenshot there (the README's picture), and
``SEQLAB_SERVE_RUN=RUN_DIR`` serves that run instead of the tiny translation one.

Chinese: a sentence typed in traditional characters into a zh→en run (tiny, trained on
``$SEQLAB_DATA_DIR/cmn-eng/cmn-eng.zip``; skipped without it), its source tokens on the page the
simplified ones the API read, drawn in a CJK font, and the normalisation's warning shown.
``SEQLAB_SERVE_ZH_RUN=RUN_DIR`` serves that run instead of the tiny one (no data needed), and
``SEQLAB_SERVE_SCREENSHOT_ZH=docs/serve-zh.png`` writes its screenshot there (the docs' picture:
``SEQLAB_SERVE_ZH_RUN=runs/tutorials/cmn-eng-zh-en-transformer``).

Audio: a WAV file uploaded, and a recording from a second Chromium whose microphone plays a WAV
file (Chromium's fake capture device). ``SEQLAB_SERVE_AUDIO_RUN=RUN_DIR`` with
``SEQLAB_AUDIO_WAV=FILE.wav`` records that file for that run instead of a tone for the tiny one,
and ``SEQLAB_SERVE_SCREENSHOT_AUDIO=docs/serve-audio.png`` writes the recording's screenshot
there (the docs' picture).
"""

import base64
import contextlib
import io
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import soundfile

from tiny_runs import CMN_ENG_ZIP, tone

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
INSTALL = "apt-get install chromium chromium-driver (Debian/Ubuntu), then pip install selenium"


def _browser(profile: Path, *extra: str):
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
        *extra,
    ):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def _post(url: str, body: dict) -> dict:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


#: what the server serves: model name -> tiny run (tiny_runs.py); the page opens on the first
SERVED = {
    "dates": "mt",
    "cls": "cls",
    "lm": "lm",
    "fc": "fc",
    "vit": "vit",
    "audio": "audio",
    "audio-tf": "audio-transformer",
}
#: what the environment puts in their place: model name -> variable naming a run directory
GIVEN = {"dates": "SEQLAB_SERVE_RUN", "audio": "SEQLAB_SERVE_AUDIO_RUN"}


@contextlib.contextmanager
def _serving(runs: dict[str, str], tmp_path: Path):
    """``seqlab serve NAME=RUN...`` on a free port, its URL while it runs (its log in
    ``tmp_path/server.log``)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SEQLAB_OFFLINE": "1"}
    served = [f"{name}={run}" for name, run in runs.items()]
    argv = [sys.executable, "-m", "seqlab", "serve", *served, "--port", str(port)]
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


@pytest.fixture(scope="module")
def server(tiny_runs, tmp_path_factory):
    given = {name: os.environ[var] for name, var in GIVEN.items() if os.environ.get(var)}
    runs = {name: given.get(name) or str(tiny_runs[run]) for name, run in SERVED.items()}
    with _serving(runs, tmp_path_factory.mktemp("server")) as url:
        yield url


@pytest.mark.slow
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

        # the inputs' bounds are this server's (its schema: the limits max_beam and max_nbest,
        # the options model's length penalty), not numbers of the page's own
        bound = {b: driver.find_element(By.ID, b).get_attribute("max") for b in ("beam", "nbest")}
        assert bound == {"beam": "10", "nbest": "10"}
        assert driver.find_element(By.ID, "length-penalty").get_attribute("max") == "10"
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


def _open(driver, server, model):
    """The page with ``model`` chosen in its select, once its panel is mounted."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    wait = WebDriverWait(driver, 20)
    driver.get(server)
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#model option"))
    Select(driver.find_element(By.ID, "model")).select_by_value(model)
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, f'section.panel[data-model="{model}"]'))
    wait.until(lambda d: d.find_element(By.ID, "status").text == "ready")
    return wait


def _no_severe_errors(driver):
    errors = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    assert not errors, errors


def _type(driver, field, text):
    from selenium.webdriver.common.by import By

    box = driver.find_element(By.ID, field)
    box.clear()
    box.send_keys(text)


#: typed in traditional characters; the zh→en run reads it as simplified (data.normalize)
TRADITIONAL = "我愛機器學習。"
SIMPLIFIED = "我爱机器学习。"


@pytest.fixture(scope="module")
def zh_server(tiny_runs, tmp_path_factory):
    """A server of two translation runs, the tiny dates one first (the page opens on it) and a
    zh→en one: ``$SEQLAB_SERVE_ZH_RUN``, else the tiny one of tiny_runs.py (cmn-eng data)."""
    run = os.environ.get("SEQLAB_SERVE_ZH_RUN")
    if not run:
        if not CMN_ENG_ZIP.is_file():
            pytest.skip(f"no {CMN_ENG_ZIP} (cmn-eng/ in $SEQLAB_DATA_DIR)")
        run = str(tiny_runs["zh-en"])
    with _serving({"dates": str(tiny_runs["mt"]), "zh": run}, tmp_path_factory.mktemp("zh")) as url:
        yield url


def _cjk_families() -> set[str]:
    """The font families fontconfig lists for Chinese (what Chromium on Linux falls back on)."""
    try:
        listed = subprocess.run(
            ["fc-list", ":lang=zh", "family"], capture_output=True, text=True, timeout=30
        ).stdout
    except OSError:
        return set()
    return {name.strip() for line in listed.splitlines() for name in line.split(",") if name}


def _drawn_in(driver, selector: str) -> list[set[str]]:
    """For each element matching ``selector``, the font families Chromium drew its text in
    (DevTools' CSS.getPlatformFontsForNode: the fonts that gave its glyphs)."""
    driver.execute_cdp_cmd("DOM.enable", {})
    driver.execute_cdp_cmd("CSS.enable", {})
    root = driver.execute_cdp_cmd("DOM.getDocument", {"depth": -1})["root"]["nodeId"]
    found = driver.execute_cdp_cmd("DOM.querySelectorAll", {"nodeId": root, "selector": selector})
    return [
        {
            f["familyName"]
            for f in driver.execute_cdp_cmd("CSS.getPlatformFontsForNode", {"nodeId": n})["fonts"]
        }
        for n in found["nodeIds"]
    ]


@pytest.mark.slow
def test_translate_chinese_typed_in_traditional_characters_in_chromium(zh_server, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    driver = _browser(tmp_path / "profile")
    try:
        wait = _open(driver, zh_server, "zh")
        assert "zh→en" in driver.find_element(By.ID, "model-info").text
        _type(driver, "source", TRADITIONAL)
        driver.find_element(By.ID, "translate").click()
        status = driver.find_element(By.ID, "status")
        wait.until(lambda d: status.text.startswith("translated"))
        body = {"model": "zh", "text": [TRADITIONAL], "attention": True}  # what the page sends
        answer = _post(zh_server + "/translate", body)
        (translation,) = answer["translations"]
        detail = translation["detail"]

        # what the encoder read, as the API says: simplified characters, no escapes
        read = detail["source_tokens"]
        unknown = " ".join(w for w in answer["warnings"] if "not in the model's vocabulary" in w)
        for char in SIMPLIFIED.rstrip("。"):  # each one read, or named as not in the vocabulary
            assert any(char in t for t in read) or f"'{char}'" in unknown, (char, read)
        assert not set("愛機學習") & set("".join(read)), read
        assert not [t for t in read if re.search(r"\\[uUx]|&#|<0x", t)], read

        # the page shows the same tokens: the cross-attention's keys and the encoder's own
        svg = driver.find_element(By.ID, "att-lines")
        assert Select(driver.find_element(By.ID, "att-kind")).first_selected_option.text == "cross"
        keys = lambda: [k.text for k in svg.find_elements(By.CSS_SELECTOR, "text.key")]  # noqa: E731
        assert keys() == read
        Select(driver.find_element(By.ID, "att-kind")).select_by_visible_text("encoder")
        queries = [q.text for q in svg.find_elements(By.CSS_SELECTOR, "text.query")]
        assert queries == keys() == read
        Select(driver.find_element(By.ID, "att-kind")).select_by_visible_text("cross")
        shown = [t.text for t in driver.find_elements(By.CSS_SELECTOR, ".tokens.output .tok")]
        assert shown == detail["target_tokens"]

        # the normalisation (and any unknown character) named under the translation
        notes = [n.text for n in driver.find_elements(By.CSS_SELECTOR, "#output .note")]
        assert notes == answer["notes"] + answer["warnings"]
        assert answer["warnings"][0].startswith(
            "text 1: normalised (data.normalize=simplified): '愛' -> '爱', '機' -> '机'"
        )

        # hovering an output token keeps its lines (the screenshot shows them)
        ActionChains(driver).move_to_element(
            svg.find_elements(By.CSS_SELECTOR, "text.query")[0]
        ).perform()
        wait.until(lambda d: int(svg.get_attribute("data-highlighted") or 0) > 0)
        shot = tmp_path / "serve-zh.png"
        assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
        if os.environ.get("SEQLAB_SERVE_SCREENSHOT_ZH"):
            shutil.copyfile(shot, os.environ["SEQLAB_SERVE_SCREENSHOT_ZH"])
        _no_severe_errors(driver)

        # drawn as characters, not boxes: each Chinese label's glyphs came from a CJK font
        families = _cjk_families()
        if not families:
            pytest.skip("no CJK font to draw Chinese with: apt-get install fonts-wqy-microhei")
        chinese = [i for i, t in enumerate(read) if re.search("[\u4e00-\u9fff]", t)]
        drawn = _drawn_in(driver, "#att-lines text.key")
        assert chinese and all(drawn[i] & families for i in chinese), [drawn[i] for i in chinese]
    finally:
        driver.quit()


def test_classify_texts_in_chromium(server, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    driver = _browser(tmp_path / "profile")
    try:
        wait = _open(driver, server, "cls")
        assert not driver.find_element(By.ID, "cls-image").is_displayed()
        texts = ["a wonderful story", "boring mess zzz"]
        _type(driver, "cls-text", "\n".join(texts))
        driver.find_element(By.ID, "classify").click()
        wait.until(lambda d: d.find_element(By.ID, "status").text == "classified")
        answer = _post(server + "/classify", {"model": "cls", "text": texts, "attention": True})

        # each text's label and its labels' bars, as the API answers
        results = driver.find_elements(By.CSS_SELECTOR, "#output .result")
        assert len(results) == len(answer["results"]) == 2
        for box, text, r in zip(results, texts, answer["results"], strict=True):
            assert box.find_element(By.CSS_SELECTOR, ".muted").text == text
            label = box.find_element(By.TAG_NAME, "strong").text.split()
            assert label == [r["label"], f"{100 * r['probability']:.1f}%"]
            ranked = sorted(r["probabilities"].items(), key=lambda kv: -kv[1])
            bars = box.find_elements(By.CSS_SELECTOR, ".probs > div")
            assert [b.text for b in bars] == [f"{k} {100 * p:.1f}%" for k, p in ranked]
        notes = driver.find_elements(By.CSS_SELECTOR, "#output > .note")
        assert answer["warnings"] and [n.text for n in notes] == answer["warnings"]

        # the first text's self-attention in the explorer; a click on the second shows its own
        assert driver.find_element(By.ID, "explorer").is_displayed()
        assert [o.text for o in Select(driver.find_element(By.ID, "att-kind")).options] == ["self"]
        svg = driver.find_element(By.ID, "att-lines")
        for i, box in enumerate(results):
            box.click()
            assert "selected" in box.get_attribute("class")
            tokens = answer["results"][i]["attention"]["tokens"]
            assert [t.text for t in svg.find_elements(By.CSS_SELECTOR, "text.query")] == tokens
        layers = answer["results"][1]["attention"]["layers"]
        assert len(driver.find_elements(By.CSS_SELECTOR, "#grid canvas")) == len(layers) * len(
            layers[0]
        )
        driver.save_screenshot(str(tmp_path / "classify.png"))
        _no_severe_errors(driver)
    finally:
        driver.quit()


@pytest.mark.slow
def test_classify_an_image_with_its_rollout_in_chromium(server, tmp_path):
    from PIL import Image
    from selenium.webdriver.common.by import By

    image = Image.new("L", (28, 28), 10)
    image.paste(255, (6, 6, 14, 14))
    image.save(tmp_path / "digit.png")
    driver = _browser(tmp_path / "profile")
    try:
        wait = _open(driver, server, "vit")
        assert not driver.find_element(By.ID, "cls-text").is_displayed()
        driver.find_element(By.ID, "cls-image").send_keys(str(tmp_path / "digit.png"))
        driver.find_element(By.ID, "classify").click()
        rollout = wait.until(lambda d: d.find_elements(By.ID, "rollout"))[0]
        assert rollout.is_displayed()
        data = base64.b64encode((tmp_path / "digit.png").read_bytes()).decode()
        answer = _post(server + "/classify", {"model": "vit", "image": data, "attention": True})
        (r,) = answer["results"]
        label = driver.find_element(By.CSS_SELECTOR, "#output .result strong").text.split()
        assert label == [r["label"], f"{100 * r['probability']:.1f}%"]
        patches = driver.find_elements(By.CSS_SELECTOR, "#att-lines text.query")
        assert [t.text for t in patches] == r["attention"]["tokens"]
        # the canvas shows the image under the rollout: its corners differ from its middle
        pixels = driver.execute_script(
            "const c = arguments[0].getContext('2d');"
            "return [c.getImageData(1, 1, 1, 1).data[0], c.getImageData(80, 80, 1, 1).data[0]];",
            rollout,
        )
        assert pixels[0] != pixels[1]
        driver.save_screenshot(str(tmp_path / "rollout.png"))
        _no_severe_errors(driver)
    finally:
        driver.quit()


@pytest.mark.slow
def test_generate_streams_tokens_in_chromium(server, tmp_path):
    from selenium.webdriver.common.by import By

    driver = _browser(tmp_path / "profile")
    try:
        wait = _open(driver, server, "lm")
        status = driver.find_element(By.ID, "status")
        assert driver.find_element(By.ID, "stream").is_selected()
        for field, value in (("prefix", "the time"), ("tokens", "30"), ("temperature", "0.8")):
            _type(driver, field, value)
        _type(driver, "seed", "3")
        body = {"model": "lm", "prefix": "the time", "tokens": 30, "temperature": 0.8, "seed": 3}
        answer = _post(server + "/generate", body)
        assert len(answer["tokens"]) == 30

        # streamed: one token event after another, the same text as the API's answer at once
        driver.find_element(By.ID, "generate").click()
        wait.until(lambda d: "(streamed)" in status.text)
        shown = driver.find_element(By.CSS_SELECTOR, "#output .generated")
        assert shown.get_attribute("textContent") == answer["text"]
        assert status.text == "generated 30 tokens (streamed)"
        driver.save_screenshot(str(tmp_path / "generate.png"))

        # not streamed: the same again
        driver.find_element(By.ID, "stream").click()
        driver.find_element(By.ID, "generate").click()
        wait.until(lambda d: status.text == "generated 30 tokens")
        shown = driver.find_element(By.CSS_SELECTOR, "#output .generated")
        assert shown.get_attribute("textContent") == answer["text"]
        _no_severe_errors(driver)
    finally:
        driver.quit()


def _forecast_shown(driver):
    from selenium.webdriver.common.by import By

    text = driver.find_element(By.CSS_SELECTOR, "#output .result").text
    assert text.startswith("forecast: ")
    return [float(v) for v in text.removeprefix("forecast: ").split(", ")]


@pytest.mark.slow
def test_forecast_from_values_and_from_a_csv_in_chromium(server, tmp_path):
    from selenium.webdriver.common.by import By

    values = [round(math.sin(i / 3), 4) for i in range(24)]
    driver = _browser(tmp_path / "profile")
    try:
        wait = _open(driver, server, "fc")
        status = driver.find_element(By.ID, "status")
        _type(driver, "history", ", ".join(map(str, values)))
        _type(driver, "steps", "6")
        driver.find_element(By.ID, "forecast").click()
        wait.until(lambda d: status.text.startswith("forecast 6 steps"))
        answer = _post(server + "/forecast", {"model": "fc", "history": values, "steps": 6})
        assert status.text == f"forecast 6 steps from 24 values (window {answer['window']})"
        # the values, to the 4 significant digits the page shows
        assert _forecast_shown(driver) == pytest.approx(answer["forecast"], rel=1e-3, abs=1e-9)
        chart = driver.find_element(By.ID, "chart")
        assert chart.is_displayed()
        lines = {
            line.get_attribute("class"): line.get_attribute("points").split()
            for line in chart.find_elements(By.TAG_NAME, "polyline")
        }
        assert len(lines["given"]) == 24 and len(lines["continued"]) == 1 + 6
        assert lines["continued"][0] == lines["given"][-1]
        driver.save_screenshot(str(tmp_path / "forecast.png"))

        # a CSV file instead: its column read by the server, the same forecast as the API's
        rows = [f"{i},{math.cos(i / 4):.4f}" for i in range(30)]
        csv = "step,value\n" + "\n".join(rows) + "\n"
        (tmp_path / "series.csv").write_text(csv)
        driver.find_element(By.ID, "csv").send_keys(str(tmp_path / "series.csv"))
        driver.find_element(By.ID, "forecast").click()
        wait.until(lambda d: "from 30 values" in status.text)
        answer = _post(server + "/forecast", {"model": "fc", "csv": csv, "steps": 6})
        assert _forecast_shown(driver) == pytest.approx(answer["forecast"], rel=1e-3, abs=1e-9)
        _no_severe_errors(driver)
    finally:
        driver.quit()


#: run before the page's scripts: /models as if no task shipped a panel script
NO_PANELS = """
const fetched = window.fetch;
window.fetch = async (...args) => {
  const response = await fetched(...args);
  if (String(args[0]) !== "/models" || !response.ok) return response;
  const data = await response.json();
  for (const m of data.models) m.panel = null;
  return new Response(JSON.stringify(data), {headers: {"content-type": "application/json"}});
};
"""


def _answer(driver, wait):
    from selenium.webdriver.common.by import By

    wait.until(lambda d: d.find_element(By.ID, "status").text.startswith("answered"))
    return json.loads(driver.find_element(By.ID, "answer").get_attribute("textContent"))


@pytest.mark.slow
def test_a_task_without_a_panel_gets_a_form_from_its_request_schema(server, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    driver = _browser(tmp_path / "profile")
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": NO_PANELS})
    field = lambda name: driver.find_element(By.ID, f"field-{name}")  # noqa: E731
    try:
        # /translate: its fields (the required input first, then the schema's order), bounds
        # and descriptions (positive integers start at 1)
        wait = _open(driver, server, "dates")
        assert driver.find_elements(By.ID, "panel-generic") and not driver.find_elements(
            By.ID, "source"
        )
        names = [
            e.get_attribute("id") for e in driver.find_elements(By.CSS_SELECTOR, "[id^=field-]")
        ]
        assert names == [
            f"field-{n}" for n in ("text", "beam", "length_penalty", "nbest", "attention")
        ]
        assert field("text").tag_name == "textarea"
        assert [field("beam").get_attribute(a) for a in ("min", "max", "step")] == ["1", "10", "1"]
        bounds = [field("length_penalty").get_attribute(a) for a in ("min", "max", "step")]
        assert bounds == ["0", "10", "any"]
        assert field("attention").get_attribute("type") == "checkbox"
        label = driver.find_element(By.CSS_SELECTOR, "label[for=field-beam]")
        assert "beam size" in label.get_attribute("title")

        # /forecast: an enum is a select with its default; a required field left empty sends nothing
        wait = _open(driver, server, "fc")
        missing = Select(field("missing"))
        # left out (the empty choice) the server reads it as its default, error
        assert [o.text for o in missing.options] == ["", "error", "interpolate", "drop"]
        assert missing.first_selected_option.text == ""
        values = [round(math.sin(i / 3), 4) for i in range(12)]
        _type(driver, "field-history", " ".join(map(str, values)))
        driver.find_element(By.ID, "send").click()
        status = driver.find_element(By.ID, "status")
        assert "steps is required" in status.text and "error" in status.get_attribute("class")
        assert not driver.find_elements(By.ID, "answer")
        _type(driver, "field-steps", "3")
        driver.find_element(By.ID, "send").click()
        assert _answer(driver, wait) == _post(
            server + "/forecast", {"model": "fc", "history": values, "steps": 3}
        )

        # /classify: several lines are a list of texts; the checkbox asks for attention
        wait = _open(driver, server, "cls")
        _type(driver, "field-text", "a wonderful story\nboring mess")
        field("attention").click()
        driver.find_element(By.ID, "send").click()
        body = {"model": "cls", "text": ["a wonderful story", "boring mess"], "attention": True}
        assert _answer(driver, wait) == _post(server + "/classify", body)

        # /generate: defaults filled in; stream: true shows the final answer of the stream
        wait = _open(driver, server, "lm")
        assert (field("tokens").get_attribute("value"), field("seed").get_attribute("value")) == (
            "100",
            "0",
        )
        _type(driver, "field-prefix", "the time")
        _type(driver, "field-tokens", "12")
        field("stream").click()
        driver.find_element(By.ID, "send").click()
        shown = _answer(driver, wait)
        assert driver.find_element(By.ID, "status").text == "answered (streamed, 12 tokens)"
        assert shown == _post(
            server + "/generate", {"model": "lm", "prefix": "the time", "tokens": 12}
        )
        driver.save_screenshot(str(tmp_path / "generic.png"))
        _no_severe_errors(driver)
    finally:
        driver.quit()


def _colours(driver, canvas_id):
    """How many different colours the canvas ``canvas_id`` shows (1: blank)."""
    return driver.execute_script(
        "const c = document.getElementById(arguments[0]);"
        "const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
        "const seen = new Set();"
        "for (let i = 0; i < d.length; i += 4) seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);"
        "return seen.size;",
        canvas_id,
    )


def _audio_shown(driver, answer):
    """Checks the audio panel shows ``answer``'s one result: its label, its bars, its log-mel
    frames and (where it has it) its attention over time, each canvas drawn."""
    from selenium.webdriver.common.by import By

    (r,) = answer["results"]
    assert driver.find_element(By.ID, "audio-label").text == r["label"]
    ranked = sorted(r["probabilities"].items(), key=lambda kv: -kv[1])
    bars = driver.find_elements(By.CSS_SELECTOR, "#output .probs > div")
    assert [b.text for b in bars] == [f"{k} {100 * p:.1f}%" for k, p in ranked]
    spectrogram = driver.find_element(By.ID, "audio-spectrogram")
    assert int(spectrogram.get_attribute("data-drawn")) == len(r["features"])
    assert _colours(driver, "audio-spectrogram") > 10
    assert _colours(driver, "audio-wave") > 1
    strips = driver.find_elements(By.ID, "audio-attention")
    if r["attention"] is None:
        assert not strips
    else:
        assert int(strips[0].get_attribute("data-drawn")) == len(r["attention"])
        assert _colours(driver, "audio-attention") > 1
    assert driver.find_element(By.ID, "audio-player").get_attribute("src").startswith("blob:")


@pytest.mark.slow
def test_classify_an_uploaded_wav_in_chromium(server, tmp_path):
    from selenium.webdriver.common.by import By

    # a high tone as a browser rarely gets one: 44.1 kHz, two channels, 24-bit samples
    wave = tone(1320.0, 0.6, rate=44100)
    soundfile.write(tmp_path / "tone.wav", np.stack([wave, 0.5 * wave], 1), 44100, "PCM_24")
    data = base64.b64encode((tmp_path / "tone.wav").read_bytes()).decode()
    (tmp_path / "notes.wav").write_text("not a recording\n")
    soundfile.write(tmp_path / "long.wav", np.zeros(31 * 8000, np.float32), 8000, "PCM_16")
    soundfile.write(tmp_path / "quiet.wav", np.zeros(4000, np.float32), 8000, "PCM_16")
    soundfile.write(tmp_path / "low.wav", tone(1320.0, 0.5, rate=4000), 4000, "PCM_16")
    driver = _browser(tmp_path / "profile")
    try:
        for model, attention in (("audio-tf", True), ("audio", False)):
            wait = _open(driver, server, model)
            status = driver.find_element(By.ID, "status")
            driver.find_element(By.ID, "audio-file").send_keys(str(tmp_path / "tone.wav"))
            wait.until(lambda d: status.text == "classified tone.wav")  # noqa: B023
            body = {"model": model, "audio": data, "attention": attention, "features": True}
            answer = _post(server + "/classify-audio", body)
            _audio_shown(driver, answer)
            # the waveform: the browser's own decoding of the file, every sample
            drawn = driver.find_element(By.ID, "audio-wave").get_attribute("data-drawn")
            assert int(drawn) == len(wave)
        driver.save_screenshot(str(tmp_path / "upload.png"))
        _no_severe_errors(driver)

        # not a WAV file: the server's one-line error in the status line, the last answer kept
        driver.find_element(By.ID, "audio-file").send_keys(str(tmp_path / "notes.wav"))
        wait.until(lambda d: "error" in status.get_attribute("class"))
        assert status.text.startswith("422: audio: not a WAV file libsndfile can read (")
        assert driver.find_element(By.ID, "audio-label").text == answer["results"][0]["label"]
        # longer than the server reads: its limit named
        driver.find_element(By.ID, "audio-file").send_keys(str(tmp_path / "long.wav"))
        wait.until(lambda d: status.text.startswith("413: "))
        assert status.text.endswith(
            "over the server's limit max_audio_seconds=30 [max_audio_seconds]"
        )
        # silence: "no speech detected" and why, no label and no bars
        driver.find_element(By.ID, "audio-file").send_keys(str(tmp_path / "quiet.wav"))
        wait.until(lambda d: status.text == "classified quiet.wav")
        assert driver.find_element(By.ID, "audio-label").text == "no speech detected"
        assert "digital silence" in driver.find_element(By.ID, "audio-reason").text
        assert not driver.find_elements(By.CSS_SELECTOR, "#output .probs > div")
        # 4 kHz: the answer, and beside it the warning naming both rates
        driver.find_element(By.ID, "audio-file").send_keys(str(tmp_path / "low.wav"))
        wait.until(lambda d: status.text == "classified low.wav")
        assert driver.find_element(By.ID, "audio-label").text in ("high", "low")
        warning = driver.find_element(By.CSS_SELECTOR, "#output .audio-warning").text
        assert "recorded at 4,000 Hz, below the 8,000 Hz the model reads" in warning
    finally:
        driver.quit()


#: run before the page's scripts: keeps the body of each request the page posts (window.sent)
KEEP_SENT = """
window.sent = [];
const posted = window.fetch;
window.fetch = (url, init) => {
  if (init && init.body) window.sent.push(JSON.parse(init.body));
  return posted(url, init);
};
"""


def _microphone(profile: Path, wav: Path):
    """A Chromium whose microphone plays ``wav`` once (16-bit PCM; Chromium's fake capture
    device), its permission granted, keeping what the page posts."""
    driver = _browser(
        profile,
        "--use-fake-ui-for-media-stream",
        "--use-fake-device-for-media-stream",
        f"--use-file-for-fake-audio-capture={wav}%noloop",
    )
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": KEEP_SENT})
    return driver


@pytest.mark.slow
def test_record_from_the_microphone_in_chromium(server, tmp_path):
    from selenium.webdriver.common.by import By

    given = os.environ.get("SEQLAB_AUDIO_WAV") if os.environ.get("SEQLAB_SERVE_AUDIO_RUN") else None
    if given:
        samples, rate = soundfile.read(given, dtype="float32", always_2d=True)
        samples = samples.mean(1)
        sound = np.flatnonzero(samples)  # digital silence padded on (EmoDB's 2.0 s copy): off
        samples = samples[sound[0] : sound[-1] + 1]
    else:
        samples, rate = tone(1320.0, 0.8, rate=16000), 16000
    heard = tmp_path / "heard.wav"
    soundfile.write(heard, samples, rate, "PCM_16")
    # a quiet room either side (-60 dB noise): the capture starts before the page listens, and
    # once the file has played the fake device repeats its last block
    room = 1e-3 * np.random.default_rng(0).standard_normal(int(0.3 * rate))
    played = np.concatenate([room, samples, room[::-1]]).astype(np.float32)
    soundfile.write(tmp_path / "mic.wav", played, rate, "PCM_16")
    seconds = len(samples) / rate
    driver = _microphone(tmp_path / "profile", tmp_path / "mic.wav")
    try:
        wait = _open(driver, server, "audio")
        status = driver.find_element(By.ID, "status")
        record = driver.find_element(By.ID, "record")
        record.click()
        wait.until(lambda d: record.text == "Stop" and status.text.startswith("recording"))
        time.sleep(min(seconds + 0.9, 2.2))  # stopped well before the page's own 3 s limit
        record.click()
        wait.until(lambda d: status.text == "classified the recording")
        assert record.text == "Record"
        data = base64.b64encode(heard.read_bytes()).decode()
        answer = _post(server + "/classify-audio", {"model": "audio", "audio": data})
        assert driver.find_element(By.ID, "audio-label").text == answer["results"][0]["label"]

        # what the page sent: a mono 16-bit WAV file at the capture rate, its silence cut
        (body,) = [b for b in driver.execute_script("return window.sent") if "audio" in b]
        model = next(m for m in _get(server + "/models")["models"] if m["name"] == "audio")
        assert (body["features"], body["attention"]) == (True, bool(model["attention"]))
        wav = base64.b64decode(body["audio"].removeprefix("data:audio/wav;base64,"))
        info = soundfile.info(io.BytesIO(wav))
        kept, capture_rate = map(
            int, driver.find_element(By.ID, "panel-audio").get_attribute("data-recorded").split()
        )
        assert (info.channels, info.subtype, info.samplerate) == (1, "PCM_16", capture_rate)
        assert info.frames == kept and capture_rate >= 8000
        # no more than the file's sound and 0.05 s either side, no less than half of it
        assert seconds / 2 <= info.duration <= seconds + 0.15
        _audio_shown(driver, _post(server + "/classify-audio", body))

        shot = tmp_path / "record.png"
        assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
        if os.environ.get("SEQLAB_SERVE_SCREENSHOT_AUDIO"):
            shutil.copyfile(shot, os.environ["SEQLAB_SERVE_SCREENSHOT_AUDIO"])

        # left alone, a recording stops by itself after 3 s (the fake device plays the file again)
        record.click()
        wait.until(lambda d: record.text == "Stop")
        wait.until(lambda d: record.text == "Record")
        wait.until(lambda d: len(d.execute_script("return window.sent")) == 2)
        wait.until(lambda d: status.text == "classified the recording")
        assert driver.find_element(By.ID, "audio-label").text == answer["results"][0]["label"]
        _no_severe_errors(driver)
    finally:
        driver.quit()


@pytest.mark.slow
def test_the_api_docs_render_with_the_network_unplugged(server, tmp_path):
    """``/docs`` (Swagger UI over this server's schema) renders in Chromium with every host but
    the server's unreachable: its script and styles are the server's own. The screenshot is
    ``docs/serve-api-docs-offline.png`` when ``SEQLAB_DOCS_SCREENSHOT`` names it."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    unplugged = "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"
    driver = _browser(tmp_path / "profile", unplugged)
    try:
        driver.get(server + "/docs")
        wait = WebDriverWait(driver, 30)
        paths = wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".opblock-summary-path"))
        shown = {p.text.replace("\u200b", "") for p in paths}
        assert {"/translate", "/classify", "/generate", "/forecast", "/models"} <= shown
        loaded = driver.execute_script(
            "return performance.getEntriesByType('resource').map((e) => e.name)"
        )
        assert loaded and all(url.startswith(server) for url in loaded), loaded
        _no_severe_errors(driver)
        shot = tmp_path / "docs.png"
        assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
        if os.environ.get("SEQLAB_DOCS_SCREENSHOT"):
            shutil.copyfile(shot, os.environ["SEQLAB_DOCS_SCREENSHOT"])
    finally:
        driver.quit()
