import gzip
import hashlib
import os
from pathlib import Path

import pytest

from cli_checks import fails, succeeds
from seqlab import catalog
from seqlab.data import parallel, registry
from seqlab.errors import DataError


def test_every_dataset_has_url_checksum_licence():
    assert set(registry.DATASETS) == {
        "timemachine",
        "tinyshakespeare",
        "fra-eng",
        "multi30k",
        "sst2",
        "ag_news",
        "mnist",
        "sunspots",
        "cmn-eng",
        "fsdd",
        "emodb",
    }
    for ds in registry.DATASETS.values():
        assert ds.licence and (ds.files or ds.folder)  # files, or a folder found or downloaded
        for f in ds.files:
            assert f.url.startswith(("http://", "https://"))
            assert all(len(d) == 64 for d in f.sha256)
            # Every download is verified: by the file's own digest or, for files stored
            # re-compressed, by the digest of what the server sends.
            assert f.sha256 or (f.gzip and f.source_sha256 and len(f.source_sha256) == 64)
    names = {f.name for f in registry.DATASETS["multi30k"].files}
    for split in parallel.MULTI30K_SPLITS:
        for lang in parallel.MULTI30K_LANGS:
            assert f"{split}.{lang}.gz" in names


@pytest.fixture
def fake_dataset(monkeypatch, tmp_path):
    """A one-file dataset whose checksum we control."""
    content = b"hello world\n"
    entry = registry.DataFile(
        "a.txt", "http://127.0.0.1:9/a.txt", (hashlib.sha256(content).hexdigest(),)
    )
    ds = catalog.DatasetSpec("fake", "fake", print, files=(entry,), licence="none")
    monkeypatch.setenv("SEQLAB_DATA_DIR", str(tmp_path / "mirror"))
    monkeypatch.setenv("SEQLAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SEQLAB_OFFLINE", "1")
    with catalog.registered(ds):
        yield content, tmp_path


def test_mirror_is_preferred_to_cache(fake_dataset):
    content, tmp = fake_dataset
    for base in ("mirror", "cache"):
        (tmp / base / "fake").mkdir(parents=True)
        (tmp / base / "fake" / "a.txt").write_bytes(content)
    assert registry.resolve("fake", "a.txt") == tmp / "mirror" / "fake" / "a.txt"
    (tmp / "mirror" / "fake" / "a.txt").unlink()
    assert registry.resolve("fake", "a.txt") == tmp / "cache" / "fake" / "a.txt"


def test_missing_offline_names_file_places_and_remedy(fake_dataset):
    _, tmp = fake_dataset
    with pytest.raises(DataError) as exc:
        registry.resolve("fake", "a.txt")
    msg = str(exc.value)
    assert "fake/a.txt" in msg
    assert (
        str(tmp / "mirror" / "fake" / "a.txt") in msg
        and str(tmp / "cache" / "fake" / "a.txt") in msg
    )
    assert "SEQLAB_OFFLINE" in msg and "SEQLAB_DATA_DIR" in msg and "seqlab data fetch fake" in msg


def test_checksum_mismatch_is_refused_with_both_digests(fake_dataset):
    content, tmp = fake_dataset
    (tmp / "mirror" / "fake").mkdir(parents=True)
    bad = tmp / "mirror" / "fake" / "a.txt"
    bad.write_bytes(b"tampered\n")
    with pytest.raises(DataError) as exc:
        registry.resolve("fake", "a.txt")
    msg = str(exc.value)
    assert "checksum mismatch" in msg and str(bad) in msg
    assert (
        hashlib.sha256(content).hexdigest() in msg
        and hashlib.sha256(b"tampered\n").hexdigest() in msg
    )


def test_download_verifies_and_moves_atomically(fake_dataset, monkeypatch):
    content, tmp = fake_dataset
    monkeypatch.delenv("SEQLAB_OFFLINE")

    class Response:
        def __init__(self, data):
            self.data = [data, b""]

        def read(self, n):
            return self.data.pop(0)

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

    served = {"body": b"corrupted download"}
    monkeypatch.setattr(
        registry.urllib.request, "urlopen", lambda url, timeout: Response(served["body"])
    )
    with pytest.raises(DataError, match="checksum mismatch"):
        registry.resolve("fake", "a.txt")
    cache = tmp / "cache" / "fake"
    assert not any(cache.iterdir()), "a failed download must leave nothing in the cache"
    served["body"] = content
    path = registry.resolve("fake", "a.txt")
    assert path == cache / "a.txt" and path.read_bytes() == content
    assert sorted(os.listdir(cache)) == ["a.txt"]


def test_unknown_dataset_and_file():
    with pytest.raises(DataError, match="unknown dataset 'nope'.*timemachine"):
        registry.resolve("nope", "x")
    with pytest.raises(DataError, match="no file 'x'.*timemachine.txt"):
        registry.resolve("timemachine", "x")


@pytest.mark.skipif(not os.environ.get("SEQLAB_DATA_DIR"), reason="needs SEQLAB_DATA_DIR")
def test_shared_copies_verify():
    """Every file the local mirror holds passes its checksum (the mirror may hold a subset:
    AG News, for instance, only its test split)."""
    mirror = Path(os.environ["SEQLAB_DATA_DIR"])
    checked = 0
    for name, ds in registry.DATASETS.items():
        for f in ds.files:
            if (mirror / name / f.name).is_file():
                assert registry.resolve(name, f.name).is_file()
                checked += 1
    assert checked > 0


def test_the_catalog_record_is_the_only_list_of_files(fake_dataset):
    """registry.DATASETS is read from the catalog: a record registered with files is fetchable,
    and gone once unregistered; files need a licence."""
    record = catalog.datasets()["fake"]
    assert registry.DATASETS["fake"] is record and registry.get_dataset("fake") is record
    with pytest.raises(DataError, match="'series' reads your file"):
        registry.get_dataset("series")
    with pytest.raises(ValueError, match="need a licence"):
        catalog.register_dataset(catalog.DatasetSpec("x", "fake", print, files=record.files))
    assert "x" not in catalog.datasets()


def test_a_record_without_files_is_not_fetchable():
    assert "fake" not in registry.DATASETS
    assert not catalog.datasets()["sine"].files and "sine" not in registry.DATASETS


@pytest.fixture
def gz_dataset(monkeypatch, tmp_path):
    """A dataset stored re-compressed (like SST-2): its registry digests are those of the
    published, uncompressed content; no local digest is known."""
    content = b"published content\n"
    entry = registry.DataFile(
        "a.txt.gz",
        "http://127.0.0.1:9/a.txt",
        (),
        source_sha256=hashlib.sha256(content).hexdigest(),
        gzip=True,
    )
    plain = registry.DataFile(
        "b.txt",
        "http://127.0.0.1:9/b.zip",
        (hashlib.sha256(content).hexdigest(),),
        archive_member="b.txt",
    )
    fake = catalog.DatasetSpec("fake", "fake", print, files=(entry, plain), licence="none")
    monkeypatch.setenv("SEQLAB_DATA_DIR", str(tmp_path / "mirror"))
    monkeypatch.setenv("SEQLAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SEQLAB_OFFLINE", "1")
    folder = tmp_path / "mirror" / "fake"
    folder.mkdir(parents=True)
    with catalog.registered(fake):
        yield content, folder


def test_a_sidecar_never_vouches_for_a_tampered_file(gz_dataset, capsys):
    content, folder = gz_dataset
    tampered = gzip.compress(b"tampered content\n")
    (folder / "a.txt.gz").write_bytes(tampered)
    (folder / "a.txt.gz.sha256").write_text(hashlib.sha256(tampered).hexdigest() + "\n")
    (folder / "b.txt").write_bytes(b"tampered\n")
    (folder / "b.txt.sha256").write_text(hashlib.sha256(b"tampered\n").hexdigest() + "\n")
    fails(capsys, ["data", "fetch", "fake"], "checksum mismatch", folder / "a.txt.gz")
    with pytest.raises(DataError, match="checksum mismatch"):
        registry.resolve("fake", "b.txt")
    # the published content, compressed by any compressor, is accepted on the registry's word
    (folder / "a.txt.gz").write_bytes(gzip.compress(content, compresslevel=1, mtime=123))
    (folder / "b.txt").write_bytes(content)
    out = succeeds(capsys, ["data", "fetch", "fake"]).out
    assert str(folder / "a.txt.gz") in out and str(folder / "b.txt") in out
