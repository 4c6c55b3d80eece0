"""seqlab's own datasets, position schemes, recurrent cells, tasks' run files and translation
engines, as records: what a config names and validates, what ``seqlab data list`` shows, what
``seqlab data fetch`` downloads and what ``--engine`` takes, with no reader and no PyTorch (the
readers: :data:`seqlab.data.readers.READERS`; the schemes' code:
:mod:`seqlab.nn.attention_positions`; the cells' classes: :data:`seqlab.nn.cells.CELLS`; the
engines: :mod:`seqlab.tasks.translation.engines`). :mod:`seqlab.catalog` imports it and registers
them.
"""

from __future__ import annotations

import typing
from typing import Literal

from seqlab.records import CellSpec, DataFile, DatasetSpec, PositionSpec

MULTI30K_RAW = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/"
_MULTI30K_SHA256 = {
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "test_2016_flickr.fr.gz": "6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90",
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "train.fr.gz": "622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "val.fr.gz": "ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9",
}
CMN_ENG_FILE = "cmn-eng.zip"
CMN_ENG_URL = "http://www.manythings.org/anki/cmn-eng.zip"
#: the 2026-02-13 export; manythings.org replaces the file with each export, so a newer one is
#: refused by its checksum until its digest is added here
CMN_ENG_SHA256 = "d606361aa7312dcdfb15ef4fc51cb1e7ed8bc2dc608a7b192626cd36e8403106"
SST2_LABELS = ("negative", "positive")
AG_NEWS_LABELS = ("World", "Sports", "Business", "Sci/Tech")
AG_NEWS_URL = "https://raw.githubusercontent.com/mhjabreel/CharCnn_Keras/master/data/ag_news_csv/"
MNIST_LABELS = tuple(str(d) for d in range(10))
MNIST_URL = "https://ossci-datasets.s3.amazonaws.com/mnist/"  # torchvision's mirror of LeCun's
_MNIST_SHA256 = {
    "train-images-idx3-ubyte.gz": "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
    "train-labels-idx1-ubyte.gz": "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
    "t10k-images-idx3-ubyte.gz": "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
    "t10k-labels-idx1-ubyte.gz": "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
}
FSDD_LABELS = tuple(str(d) for d in range(10))
FSDD_SPEAKERS = ("george", "jackson", "lucas", "nicolas", "theo", "yweweler")
#: the labels, in this order in every matrix and report
EMODB_EMOTIONS = ("anger", "boredom", "disgust", "fear", "happiness", "neutral", "sadness")
#: the ten actors, in the folds' order (each fold validates on the next)
EMODB_SPEAKERS = ("03", "08", "09", "10", "11", "12", "13", "14", "15", "16")

#: seqlab's own datasets, in the order ``seqlab data list`` reads them
DATASETS: tuple[DatasetSpec, ...] = (
    DatasetSpec(
        "timemachine",
        "language_modeling",
        summary="H. G. Wells, The Time Machine (the corpus of d2l.ai §9.2)",
        files=(
            DataFile(
                "timemachine.txt",
                "http://d2l-data.s3-accelerate.amazonaws.com/timemachine.txt",
                ("4149e15a170aa94068969282e8b2cee7aaab0d889bf1c0d684378177040267dd",),
            ),
        ),
        licence="public domain (Project Gutenberg #35)",
        citation="Wells, H. G. (1895). The Time Machine.",
    ),
    DatasetSpec(
        "tinyshakespeare",
        "language_modeling",
        summary="Tiny Shakespeare (Karpathy's char-rnn corpus, 1.1M characters)",
        files=(
            DataFile(
                "input.txt",
                "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",
                ("86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",),
            ),
        ),
        licence="public domain text",
        citation="Karpathy, A. (2015). char-rnn.",
    ),
    DatasetSpec(
        "text",
        "language_modeling",
        needs_path=True,
        summary="your UTF-8 text file (data.path); its last val_fraction validates",
    ),
    DatasetSpec(
        "multi30k",
        "translation",
        summary="Multi30k task 1: image captions in en/de/fr (data.src_lang, data.tgt_lang)",
        files=tuple(
            DataFile(name, MULTI30K_RAW + name, (digest,))
            for name, digest in sorted(_MULTI30K_SHA256.items())
        ),
        licence="research use; cite Elliott et al. 2016",
        citation="Elliott, D., Frank, S., Sima'an, K., Specia, L. (2016). Multi30K.",
    ),
    DatasetSpec(
        "fra-eng",
        "translation",
        summary="Tatoeba English-French pairs (d2l.ai §10.5), en→fr or fr→en",
        files=(
            DataFile(
                "fra.txt",
                "http://d2l-data.s3-accelerate.amazonaws.com/fra-eng.zip",
                # the full file as in the d2l zip (the 2019-04-07 export, 167,130 lines; a copy
                # is kept in shared/data/fra-eng-full), then the 18,066-line slice in shared/data
                (
                    "0bb85dbaa1c896844649094d7eaf2e34bee34e84fe362b26ce7e8f2e12aae104",
                    "83c52c40b50fc3e2c8fdaeda0e71b9beee889547b745822b7574dc88ad4f9b76",
                ),
                archive_member="fra-eng/fra.txt",
                archive_sha1="94646ad1522d915e7b0f9296181140edcf86a4f5",
            ),
        ),
        licence="CC-BY 2.0; attribution: tatoeba.org and manythings.org/anki",
        citation="Tatoeba Project; manythings.org/anki",
    ),
    DatasetSpec(
        "cmn-eng",
        "translation",
        summary="Tatoeba Mandarin Chinese-English pairs (mixed script), zh→en or en→zh; "
        "no sentence on two sides of the split",
        files=(DataFile(CMN_ENG_FILE, CMN_ENG_URL, (CMN_ENG_SHA256,)),),
        licence="CC-BY 2.0 (France); attribution: tatoeba.org and manythings.org/anki, and "
        "each pair's own (the file's third column)",
        citation="Tatoeba Project (tatoeba.org); manythings.org/anki, export of 2026-02-13",
    ),
    DatasetSpec(
        "dates",
        "translation",
        summary="written dates to ISO dates, generated: 'may 9, 1998' → 1998-05-09",
        natural_language=False,  # an ISO date is one Moses token: paper-style BLEU says nothing
    ),
    DatasetSpec(
        "sst2",
        "classification",
        labels=SST2_LABELS,
        eval_split="dev",
        summary="GLUE SST-2: sentiment of movie-review sentences and phrases",
        files=tuple(
            DataFile(
                f"{split}.tsv.gz",
                "https://dl.fbaipublicfiles.com/glue/data/SST-2.zip",
                (gz,),
                archive_member=f"SST-2/{split}.tsv",
                source_sha256=raw,
                gzip=True,
            )
            for split, gz, raw in (
                (
                    "train",
                    "1c4843303462f8f93e006ff618a9e61d207468cafd030046d7d7fd6b78af342b",
                    "48eac26399f8456935f81dd9e3a745c1430adb6c62e233ccfe22db4a0d15d1d1",
                ),
                (
                    "dev",
                    "19553efc6f7bac0b7fdd37d4e29dc37c15e9e779767249a16f857fbfcedb23fa",
                    "54a9c12c77e402fc14d6a66a506f24d999f596b0176eb777c972cccc2f9cc4b0",
                ),
            )
        ),
        licence="no explicit licence (GLUE: each task under its source's terms)",
        citation="Socher et al. (2013), SST; Wang et al. (2018), GLUE.",
    ),
    DatasetSpec(
        "ag_news",
        "classification",
        labels=AG_NEWS_LABELS,
        eval_split="test",
        summary="AG's News: topic of news articles (World, Sports, Business, Sci/Tech)",
        files=(
            DataFile(
                "train.csv.gz",
                AG_NEWS_URL + "train.csv",
                (),
                source_sha256="76a0a2d2f92b286371fe4d4044640910a04a803fdd2538e0f3f29a5c6f6b672e",
                gzip=True,
            ),
            DataFile(
                "test.csv.gz",
                AG_NEWS_URL + "test.csv",
                ("3c277beb6ce3dd635407635cb90a7c5ceaf87168fabb3be218e39aa2b097f706",),
                source_sha256="521465c2428ed7f02f8d6db6ffdd4b5447c1c701962353eb2c40d548c3c85699",
                gzip=True,
            ),
        ),
        licence="research / non-commercial use (the dataset's readme)",
        citation="Zhang, X., Zhao, J., LeCun, Y. (2015). Character-level ConvNets.",
    ),
    DatasetSpec(
        "text-classification",
        "classification",
        needs_path=True,
        summary="your labelled file (data.path): TSV text<TAB>label, or CSV with a header",
    ),
    DatasetSpec(
        "mnist",
        "classification",
        inputs="image",
        labels=MNIST_LABELS,
        eval_split="test",
        summary="MNIST handwritten digits, 28×28 grey (LeCun et al.)",
        files=tuple(
            DataFile(name, MNIST_URL + name, (digest,))
            for name, digest in sorted(_MNIST_SHA256.items())
        ),
        licence="CC BY-SA 3.0 (Yann LeCun and Corinna Cortes)",
        citation="LeCun, Y., Cortes, C., Burges, C. J. C. The MNIST database.",
    ),
    DatasetSpec(
        "sine",
        "forecasting",
        inputs="series",
        summary="a noisy sine, x_t = sin(0.01 t) + 0.2 ε_t (d2l.ai §9.1), generated",
    ),
    DatasetSpec(
        "sunspots",
        "forecasting",
        inputs="series",
        summary="monthly mean sunspot numbers 1749-1983 (WDC-SILSO, Zurich series)",
        files=(
            DataFile(
                "monthly-sunspots.csv",
                "https://raw.githubusercontent.com/jbrownlee/Datasets/master/monthly-sunspots.csv",
                ("c4ec8cc57d9f6fb6ecdb3e1f37f25b6f4badd5124c55931052b0cd2fc3bc71f3",),
            ),
        ),
        licence="SILSO data: CC BY-NC 4.0 (Source: WDC-SILSO, Royal Observatory of Belgium)",
        citation="SILSO World Data Center; Andrews & Herzberg (1985), Data.",
    ),
    DatasetSpec(
        "series",
        "forecasting",
        inputs="series",
        needs_path=True,
        summary="your CSV (data.path): one value per row, in data.column (default: the last)",
    ),
    DatasetSpec(
        "fsdd",
        "audio_classification",
        inputs="audio",
        labels=FSDD_LABELS,
        eval_split="test",
        speakers=FSDD_SPEAKERS,
        sample_rate=8000,
        folder=True,
        summary="Free Spoken Digit Dataset: spoken digits 0-9, 6 speakers, 8 kHz (Jackson et al.)",
        licence="CC BY-SA 4.0 (the dataset's README)",
        citation="Jackson, Z., Souza, C., Flaks, J., Pan, Y., Nicolas, H., Thite, A. Free Spoken "
        "Digit Dataset (FSDD), v1.0.10. github.com/Jakobovski/free-spoken-digit-dataset",
    ),
    DatasetSpec(
        "audio-folder",
        "audio_classification",
        inputs="audio",
        needs_path=True,
        eval_split="test",
        summary="your folder of WAV clips (data.path): LABEL/clip.wav, labels = folder names",
    ),
    DatasetSpec(
        "emodb",
        "audio_classification",
        inputs="audio",
        labels=EMODB_EMOTIONS,
        eval_split="test",
        speakers=EMODB_SPEAKERS,
        sample_rate=16000,  # the release's rate (the derived copy is resampled from it)
        folder=True,
        summary="Berlin EmoDB: 7 emotions, 10 actors (5 women, 5 men), German (Burkhardt et al.)",
        licence="CC0-1.0 as republished by audEERING (the original site states none)",
        citation="Burkhardt, F., Paeschke, A., Rolfes, M., Sendlmeier, W., Weiss, B. A database "
        "of German emotional speech. Interspeech 2005",
    ),
)

#: seqlab's own position schemes (``model.positions``), in the order listings show them
POSITIONS: tuple[PositionSpec, ...] = (
    PositionSpec(
        "sinusoidal",
        "sin/cos of position × frequency added to the embeddings (Vaswani et al. 2017, §3.5)",
        absolute=True,
        ctranslate2="seqlab's sinusoidal table as the position encodings",
    ),
    PositionSpec(
        "learned",
        "a trained vector per position added to the embeddings (GPT; Gehring et al. 2017)",
        absolute=True,
        ctranslate2="the learned tables as the position encodings",
    ),
    PositionSpec(
        "rope",
        "queries and keys rotated by position × frequency (Su et al. 2021, RoFormer)",
        linear_attention=False,
        ctranslate2="rotary embeddings: interleaved pairs, base 10000, whole head",
        pairs=True,
    ),
    PositionSpec(
        "alibi",
        "−m_h·|i − j| added to head h's logits (Press et al. 2022, Train Short, Test Long)",
        bias=True,
        linear_attention=False,
    ),
    PositionSpec(
        "t5_bias",
        "a learned scalar per head and log-bucketed distance (Raffel et al. 2020, §2.1)",
        bias=True,
        linear_attention=False,
    ),
    PositionSpec(
        "none",
        "no positions: the causal mask alone carries order (Haviv et al. 2022)",
        causal_only=True,
    ),
)

#: seqlab's own recurrent cells (``model.cell``): options, and whether PyTorch has a fused layer
#: (the classes: :data:`seqlab.nn.cells.CELLS`)
CELLS: tuple[CellSpec, ...] = (
    CellSpec("rnn", options={"nonlinearity": "tanh"}, fusable=True),
    CellSpec("rnn_relu", options={"nonlinearity": "relu"}, fusable=True),
    CellSpec("gru", fusable=True),
    CellSpec(
        "gru_reset_before",
        why_not_fused="nn.GRU applies the reset gate after the recurrent matmul",
    ),
    CellSpec("output_gated_rnn", why_not_fused="PyTorch has no such layer"),
    CellSpec("lstm", fusable=True),
    CellSpec("peephole_lstm", why_not_fused="nn.LSTM has no peephole connections"),
)

#: the files each of seqlab's own tasks writes into a run directory besides the config, the
#: checkpoints and the training's own files (each task's ``TaskSpec.artefacts``, read from here),
#: so that a check of a run's files (:func:`seqlab.storage.outputs.run_artefacts`) imports no task
RUN_FILES: dict[str, tuple[str, ...]] = {
    "language_modeling": ("vocab.json", "tokenizer.json"),
    "translation": (
        "src_vocab.json",
        "tgt_vocab.json",
        "src_tokenizer.json",
        "tgt_tokenizer.json",
        "src_tokenizer.spm.model",
        "tgt_tokenizer.spm.model",
    ),
    "classification": ("classes.json", "vocab.json", "tokenizer.json"),
    "audio_classification": ("classes.json", "calibration.json"),
    "forecasting": ("series.json",),
}

#: the engines that decode a translation model, by their one name (what ``--engine`` and
#: ``engine=`` take; :mod:`seqlab.tasks.translation.engines` runs them)
EngineName = Literal["seqlab", "ctranslate2"]
ENGINE_NAMES: tuple[str, ...] = typing.get_args(EngineName)
#: ``seqlab serve --engine``: ``auto`` too (CTranslate2 where it decodes the model)
SERVER_ENGINE_NAMES: tuple[str, ...] = ("auto", *ENGINE_NAMES)
#: CTranslate2's quantized compute types (``--quantize``, ``quantize=``); this CPU may run fewer
QuantizeType = Literal["int8", "int16", "bfloat16"]
QUANTIZE_TYPES: tuple[str, ...] = typing.get_args(QuantizeType)
