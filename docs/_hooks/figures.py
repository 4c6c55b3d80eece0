"""``make figures``: redraw every figure the docs site shows, each by the command shown beside it.

Slow (about 20 minutes on 2 cores); run it when a result changes, look at the figures, commit
them. Neither ``make docs`` nor the tests run it.

1. the tutorials' architecture diagrams (``docs/tutorials/figures/diagram-*.png``), drawn by
   ``seqlab.analysis.diagrams`` (no training: seconds); the tutorials' figures
   (``docs/tutorials/figures/``): every page at the full budget, on one thread
   (``docs/_hooks/notebooks.py``), which draws its diagrams again the same way;
2. the serving page (``docs/serve.png``): the browser test against the demo's Transformer
   (``make demo`` first); a Chinese sentence translated by tutorial 10c's zh→en Transformer
   (``docs/serve-zh.png``) when its run exists; its audio panel recording a digit
   (``docs/serve-audio.png``) when ``runs/fsdd-transformer`` exists, and an EmoDB sentence said
   sadly (``docs/serve-emotion.png``) when tutorial 14b's ``runs/tutorials/emodb-cnn`` exists;
3. the Multi30k curves (``docs/multi30k-bleu.png``, ``docs/multi30k-tiny-bleu.png``): ``seqlab
   curves`` over the runs of the Results page, only when ``runs/`` holds them (they take hours to
   train; the script names the missing runs and leaves those figures alone);
4. screenshots of the built site (``docs/site-home.png``, ``docs/site-tutorial.png``,
   ``docs/site-reference.png``, three diagrams as a page shows them,
   ``docs/site-diagram-*.png``, and a page's included source, ``docs/site-source.png``) taken by
   headless Chromium.

    python docs/_hooks/figures.py [--only diagrams|tutorials|serve|curves|site]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
BIN = Path(sys.executable).parent
#: figure → the runs ``seqlab curves`` draws (the commands on docs/results.md)
CURVES = {
    "multi30k-bleu.png": [
        "runs/m30-en-de-tiny",
        "runs/m30-en-de-transformer",
        "runs/m30-en-de-bahdanau",
        "runs/m30-en-de-seq2seq",
        "runs/m30-de-en-transformer",
        "runs/m30-en-fr-transformer",
    ],
    "multi30k-tiny-bleu.png": ["runs/m30-tiny-12k", "runs/m30-tiny-b5k", "runs/m30-en-de-tiny"],
}
#: site screenshot → the built page it shows
SCREENSHOTS = {
    "site-home.png": "index.html",
    "site-tutorial.png": "tutorials/07-attention.html",
    "site-reference.png": "reference/cli.html",
}
#: site screenshot → the built page and the diagram on it, scrolled to the middle of the window
#: (1280 px wide, so the diagram shows at the content column's width)
DIAGRAM_SCREENSHOTS = {
    "site-diagram-gru.png": ("tutorials/05-gated-cells.html", "diagram-gru.png"),
    "site-diagram-bahdanau.png": ("tutorials/07-attention.html", "diagram-bahdanau.png"),
    "site-diagram-transformer.png": (
        "tutorials/10-transformer.html",
        "diagram-transformer-blocks.png",
    ),
}
#: site screenshot → the built page and the title of the included source block on it
#: (``<!-- source: ... -->``, docs/_hooks/source.py), scrolled to the middle of the window
SOURCE_SCREENSHOTS = {
    "site-source.png": ("tutorials/05-gated-cells.html", "src/seqlab/nn/cells.py"),
}


def run(*args: str | Path, env: dict | None = None) -> None:
    print("$", " ".join(map(str, args)), flush=True)
    subprocess.run([str(a) for a in args], cwd=ROOT, env={**os.environ, **(env or {})}, check=True)


def diagrams() -> None:
    """The architecture diagrams, each by the function its page calls."""
    from seqlab.analysis.diagrams import draw_all  # deferred: matplotlib

    for path in draw_all(DOCS / "tutorials" / "figures"):
        print(path.relative_to(ROOT), flush=True)


def tutorials() -> None:
    """One thread: bf16 sums depend on how work is split between threads, and the committed
    figures should come out the same on any machine."""
    pages = sorted((DOCS / "tutorials").glob("[0-9]*.md"))
    runner = DOCS / "_hooks" / "notebooks.py"
    run(sys.executable, runner, "--budget", "full", "--runs", "runs/tutorials", *pages,
        env={"OMP_NUM_THREADS": "1"})  # fmt: skip


def serve() -> None:
    if not (ROOT / "runs/demo/transformer").is_dir():
        run("make", "demo")
    run(
        sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "tests/test_serve_browser.py",
        env={"SEQLAB_SERVE_RUN": "runs/demo/transformer", "SEQLAB_SERVE_SCREENSHOT": "docs/serve.png"},
    )  # fmt: skip
    chinese = "runs/tutorials/cmn-eng-zh-en-transformer"  # 我愛機器學習。 typed in (page 10c's run)
    if (ROOT / chinese / "run.json").is_file():
        run(
            sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "tests/test_serve_browser.py",
            "-k", "chinese",
            env={"SEQLAB_SERVE_ZH_RUN": chinese, "SEQLAB_SERVE_SCREENSHOT_ZH": "docs/serve-zh.png"},
        )  # fmt: skip
    else:
        print(f"docs/serve-zh.png: left as it is; train {chinese} first (tutorial 10c)")
    data = Path(os.environ.get("SEQLAB_DATA_DIR", "../shared/data"))
    emotion = "runs/tutorials/emodb-cnn"  # an emotion from the microphone (tutorial 14b's run)
    if (ROOT / emotion / "run.json").is_file():
        run(
            sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "tests/test_serve_browser.py",
            "-k", "microphone",
            env={"SEQLAB_SERVE_AUDIO_RUN": emotion,
                 "SEQLAB_AUDIO_WAV": str(data / "emodb/wav/08a02Tb.wav"),
                 "SEQLAB_SERVE_SCREENSHOT_AUDIO": "docs/serve-emotion.png"},
        )  # fmt: skip
    else:
        print(f"docs/serve-emotion.png: left as it is; run tutorial 14b first ({emotion})")
    audio = "runs/fsdd-transformer"  # the audio panel, recording a real digit (needs FSDD)
    if not (ROOT / audio).is_dir():
        print(
            f"docs/serve-audio.png: left as it is; train {audio} first "
            "(seqlab train configs/fsdd-transformer.yaml --out runs/fsdd-transformer)"
        )
        return
    wav = (
        Path(os.environ.get("SEQLAB_DATA_DIR", "../shared/data"))
        / "fsdd/recordings/7_jackson_3.wav"
    )
    run(
        sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "tests/test_serve_browser.py",
        "-k", "microphone",
        env={"SEQLAB_SERVE_AUDIO_RUN": audio, "SEQLAB_AUDIO_WAV": str(wav),
             "SEQLAB_SERVE_SCREENSHOT_AUDIO": "docs/serve-audio.png"},
    )  # fmt: skip


def curves() -> None:
    for figure, runs in CURVES.items():
        missing = [r for r in runs if not (ROOT / r / "metrics.jsonl").is_file()]
        if missing:
            print(f"docs/{figure}: left as it is; runs missing: {', '.join(missing)}")
            continue
        run(BIN / "seqlab", "curves", *runs, "--metric", "val_bleu_paper", "--force",
            "--png", f"docs/{figure}")  # fmt: skip


def site(folder: Path = ROOT / "site", only: tuple[str, ...] = ()) -> None:
    """Build the site into ``folder`` and take the screenshots (``only`` these names, if given)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    run(BIN / "mkdocs", "build", "--strict", "--clean", "-d", folder,
        env={"NO_MKDOCS_2_WARNING": "1"})  # fmt: skip
    shots = {name: (page, "") for name, page in SCREENSHOTS.items()} | DIAGRAM_SCREENSHOTS
    shots |= SOURCE_SCREENSHOTS
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    with tempfile.TemporaryDirectory() as profile:
        for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--disable-background-networking", "--window-size=1280,900",
                    f"--user-data-dir={profile}"):  # fmt: skip
            options.add_argument(arg)
        driver = webdriver.Chrome(
            service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"),
            options=options,
        )
        try:
            for name, (page, image) in shots.items():
                if only and name not in only:
                    continue
                driver.get((folder / page).as_uri())
                if name in SOURCE_SCREENSHOTS:
                    title = f'span[@class="filename"][starts-with(., "{image}")]'
                    shown = driver.find_element(
                        By.XPATH, f"//{title}/ancestor::div[contains(@class, 'highlight')][1]"
                    )
                    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", shown)
                elif image:
                    shown = driver.find_element(By.CSS_SELECTOR, f'img[src$="/{image}"]')
                    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", shown)
                # the header swaps the site's title for the page's on scroll (a 250 ms CSS
                # transition): wait for the fonts and for it to end
                driver.execute_async_script("document.fonts.ready.then(arguments[0])")
                time.sleep(1.0)
                driver.save_screenshot(str(DOCS / name))
                print(f"docs/{name}: {page}")
        finally:
            driver.quit()


STEPS = {
    "diagrams": diagrams,
    "tutorials": tutorials,
    "serve": serve,
    "curves": curves,
    "site": site,
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=sorted(STEPS), action="append")
    for name in parser.parse_args(argv).only or list(STEPS):
        STEPS[name]()


if __name__ == "__main__":
    main()
