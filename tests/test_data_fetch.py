"""Fetching corpora: verified copies from a mirror, verified downloads over loopback HTTP, clean failures."""

import functools
import hashlib
import http.server
import io
import tarfile
import threading
import zipfile
from pathlib import Path

import pytest

from paperlib.compendium.cli import main as cli_main
from paperlib.data.corpora import (MIRROR_ENV, Corpus, CorpusFile, CorpusFolder, DataError, fetch_corpus, get_corpus,
                                   is_fetched, listing_sha256, sha256_of)

FILES = {"tiny.train.txt": b"a b c\nb c\n", "tiny.valid.txt": b"a c\n", "tiny.test.txt": b"c b\n"}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tiny_corpus(url: str, files=FILES, prefix="./tiny/data/") -> Corpus:
    return Corpus(
        name="tiny", description="test corpus", url=url, level="word", licence="none",
        files=tuple(CorpusFile(n, prefix + n, f"tiny/{n}", _sha(b), len(b)) for n, b in files.items()),
    )


def make_tar(folder: Path, files=FILES, prefix="./tiny/data/") -> Path:
    path = folder / "tiny.tgz"
    with tarfile.open(path, "w:gz") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(prefix + name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def make_zip(folder: Path, files=FILES, prefix="tiny/data/") -> Path:
    path = folder / "tiny.zip"
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(prefix + name, data)
    return path


@pytest.fixture
def http_server(tmp_path, monkeypatch):
    """A static file server on 127.0.0.1 serving tmp_path/www; yields its base URL (and hides any mirror)."""
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    www = tmp_path / "www"
    www.mkdir()
    handler = functools.partial(_QuietHandler, directory=str(www))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield www, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*")) if folder.exists() else []


@pytest.mark.parametrize("maker", [make_tar, make_zip])
def test_download_over_loopback_http_is_verified_and_unpacked(http_server, tmp_path, maker):
    www, base = http_server
    archive = maker(www)
    corpus = tiny_corpus(f"{base}/{archive.name}", prefix="./tiny/data/" if maker is make_tar else "tiny/data/")
    folder = fetch_corpus(corpus, tmp_path / "raw", timeout=10)
    assert {p.name for p in folder.iterdir()} == set(FILES)
    for name, data in FILES.items():
        assert (folder / name).read_bytes() == data
    assert is_fetched(corpus, tmp_path / "raw")


def test_download_with_corrupt_member_fails_cleanly_and_leaves_nothing(http_server, tmp_path):
    www, base = http_server
    bad = dict(FILES, **{"tiny.valid.txt": b"a X\n"})  # same size, different bytes
    archive = make_tar(www, bad)
    corpus = tiny_corpus(f"{base}/{archive.name}")
    with pytest.raises(DataError, match="checksum mismatch for tiny.valid.txt"):
        fetch_corpus(corpus, tmp_path / "raw", timeout=10)
    assert "tiny.valid.txt" not in leftovers(tmp_path / "raw")
    assert not [n for n in leftovers(tmp_path / "raw") if n.endswith(".part") or n.startswith(".download")]


def test_truncated_archive_is_a_clear_error(http_server, tmp_path):
    www, base = http_server
    archive = make_tar(www)
    archive.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    corpus = tiny_corpus(f"{base}/{archive.name}")
    with pytest.raises(DataError, match="tiny"):
        fetch_corpus(corpus, tmp_path / "raw", timeout=10)
    assert not [n for n in leftovers(tmp_path / "raw") if n.startswith("tiny.")]


def test_missing_archive_member_and_http_404_are_clear_errors(http_server, tmp_path):
    www, base = http_server
    archive = make_tar(www, {k: v for k, v in FILES.items() if k != "tiny.test.txt"})
    with pytest.raises(DataError, match="no member 'tiny/data/tiny.test.txt'"):
        fetch_corpus(tiny_corpus(f"{base}/{archive.name}"), tmp_path / "raw", timeout=10)
    with pytest.raises(DataError, match="could not download"):
        fetch_corpus(tiny_corpus(f"{base}/nothing-here.tgz"), tmp_path / "raw2", timeout=10)


def test_fetch_from_mirror_copies_and_verifies(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "tiny").mkdir(parents=True)
    for name, data in FILES.items():
        (mirror / "tiny" / name).write_bytes(data)
    corpus = tiny_corpus("http://127.0.0.1:9/unused.tgz")
    folder = fetch_corpus(corpus, tmp_path / "raw", mirror=mirror)
    assert all((folder / n).read_bytes() == d for n, d in FILES.items())


def test_corrupt_mirror_file_is_rejected_and_nothing_is_left(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "tiny").mkdir(parents=True)
    for name, data in FILES.items():
        (mirror / "tiny" / name).write_bytes(data)
    (mirror / "tiny" / "tiny.train.txt").write_bytes(b"a b c\nb d\n")
    corpus = tiny_corpus("http://127.0.0.1:9/unused.tgz")
    with pytest.raises(DataError, match="checksum mismatch for tiny.train.txt"):
        fetch_corpus(corpus, tmp_path / "raw", mirror=mirror)
    assert leftovers(tmp_path / "raw" / "tiny") == []


def test_truncated_mirror_file_reports_its_size(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "tiny").mkdir(parents=True)
    for name, data in FILES.items():
        (mirror / "tiny" / name).write_bytes(data[:-2] if name == "tiny.test.txt" else data)
    with pytest.raises(DataError, match=r"tiny.test.txt has 2 bytes, expected 4"):
        fetch_corpus(tiny_corpus("http://127.0.0.1:9/x.tgz"), tmp_path / "raw", mirror=mirror)


def test_missing_mirror_is_a_clear_error(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        fetch_corpus(tiny_corpus("http://127.0.0.1:9/x.tgz"), tmp_path / "raw", mirror=tmp_path / "nope")


def test_a_tampered_local_copy_is_fetched_again(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "tiny").mkdir(parents=True)
    for name, data in FILES.items():
        (mirror / "tiny" / name).write_bytes(data)
    corpus = tiny_corpus("http://127.0.0.1:9/x.tgz")
    folder = fetch_corpus(corpus, tmp_path / "raw", mirror=mirror)
    (folder / "tiny.train.txt").write_bytes(b"tampered\n")
    assert not is_fetched(corpus, tmp_path / "raw")
    fetch_corpus(corpus, tmp_path / "raw", mirror=mirror)
    assert (folder / "tiny.train.txt").read_bytes() == FILES["tiny.train.txt"]


def test_unpinned_corpus_needs_explicit_consent_and_records_its_checksum(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "tiny").mkdir(parents=True)
    (mirror / "tiny" / "blob").write_bytes(b"x" * 10)
    corpus = Corpus("tiny", "d", "http://127.0.0.1:9/x.zip", (CorpusFile("blob", "blob", "tiny/blob", None, 10),),
                    "char", "none")
    with pytest.raises(DataError, match="no sha256 is pinned"):
        fetch_corpus(corpus, tmp_path / "raw", mirror=mirror)
    folder = fetch_corpus(corpus, tmp_path / "raw", mirror=mirror, allow_unpinned=True)
    assert (folder / "blob.sha256").read_text().split()[0] == _sha(b"x" * 10)
    assert is_fetched(corpus, tmp_path / "raw")


def test_registry_pins_the_manifest_checksums(manifest):
    for ours, theirs in (("ptb", "ptb"), ("ptb_char", "ptb_char"), ("wikitext2", "wikitext2")):
        corpus = get_corpus(ours)
        for split in ("train", "valid", "test"):
            entry = manifest[theirs][split]
            f = corpus.file(split)
            assert (f.mirror_path, f.sha256, f.size) == (entry["path"], entry["sha256"], entry["bytes"])


def test_fetched_mirror_files_match_their_pinned_checksums(data_root):
    for name in ("ptb", "ptb_char", "wikitext2"):
        corpus = get_corpus(name)
        for f in corpus.files:
            assert sha256_of(data_root / name / f.name) == f.sha256


def test_unknown_corpus_lists_the_known_ones():
    with pytest.raises(DataError, match="known corpora: ptb, ptb_char, wikitext2, enwik8, text8"):
        get_corpus("ptb-char")


def test_cli_fetch_failure_is_one_line_and_nonzero(tmp_path, capsys):
    code = cli_main(["data", "fetch", "ptb", "--root", str(tmp_path), "--mirror", str(tmp_path / "missing")])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith("paperlib: error:") and "\n" not in err and "does not exist" in err


def test_cli_unknown_corpus_is_one_line_and_nonzero(tmp_path, capsys):
    code = cli_main(["data", "fetch", "penn", "--root", str(tmp_path), "--mirror", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "unknown corpus 'penn'" in err and "\n" not in err


MIDI_FILES = {"a.mid": b"MThd-one", "b.mid": b"MThd-two", "c.mid": b"MThd-three"}


def tiny_folder_corpus(url: str, files=MIDI_FILES, member="tiny-1234/MIDI") -> Corpus:
    listing = "".join(f"{_sha(data)}  {name}\n" for name, data in sorted(files.items()))
    folder = CorpusFolder("MIDI", member, "tiny/MIDI", _sha(listing.encode()), len(files), ".mid")
    return Corpus(name="tiny", description="test corpus", url=url, level="piano_roll", licence="none", files=(),
                  folders=(folder,))


def _mirror_folder(tmp_path: Path, files=MIDI_FILES) -> Path:
    mirror = tmp_path / "mirror"
    (mirror / "tiny" / "MIDI").mkdir(parents=True)
    for name, data in files.items():
        (mirror / "tiny" / "MIDI" / name).write_bytes(data)
    (mirror / "tiny" / "MIDI" / "README").write_bytes(b"not part of the folder")
    return mirror


def test_folder_listing_checksum_equals_sha256sum_of_sorted_files(tmp_path):
    mirror = _mirror_folder(tmp_path)
    expected = "".join(f"{_sha(MIDI_FILES[n])}  {n}\n" for n in ("a.mid", "b.mid", "c.mid"))
    assert listing_sha256(mirror / "tiny" / "MIDI", ".mid") == (_sha(expected.encode()), 3)


def test_folder_from_mirror_is_copied_verified_and_refetched_when_tampered(tmp_path):
    mirror = _mirror_folder(tmp_path)
    corpus = tiny_folder_corpus("http://127.0.0.1:9/unused.zip")
    folder = fetch_corpus(corpus, tmp_path / "raw", mirror=mirror)
    assert sorted(p.name for p in (folder / "MIDI").iterdir()) == sorted(MIDI_FILES)
    (folder / "MIDI" / "b.mid").write_bytes(b"tampered")
    assert not is_fetched(corpus, tmp_path / "raw")
    fetch_corpus(corpus, tmp_path / "raw", mirror=mirror)
    assert (folder / "MIDI" / "b.mid").read_bytes() == MIDI_FILES["b.mid"]


def test_corrupt_or_incomplete_mirror_folder_is_rejected_and_nothing_is_left(tmp_path):
    corpus = tiny_folder_corpus("http://127.0.0.1:9/unused.zip")
    mirror = _mirror_folder(tmp_path, dict(MIDI_FILES, **{"c.mid": b"MThd-thre3"}))
    with pytest.raises(DataError, match="checksum mismatch for folder MIDI"):
        fetch_corpus(corpus, tmp_path / "raw", mirror=mirror)
    assert leftovers(tmp_path / "raw" / "tiny") == []
    (mirror / "tiny" / "MIDI" / "c.mid").unlink()
    with pytest.raises(DataError, match="has 2 .mid files, expected 3"):
        fetch_corpus(corpus, tmp_path / "raw", mirror=mirror)
    assert leftovers(tmp_path / "raw" / "tiny") == []


def test_folder_download_keeps_only_the_folders_own_files(http_server, tmp_path):
    www, base = http_server
    members = {f"tiny-1234/MIDI/{n}": d for n, d in MIDI_FILES.items()}
    members["tiny-1234/MIDI/melody/a.mid"] = b"a part, not a tune"
    members["tiny-1234/README.md"] = b"readme"
    with zipfile.ZipFile(www / "tiny.zip", "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    corpus = tiny_folder_corpus(f"{base}/tiny.zip")
    folder = fetch_corpus(corpus, tmp_path / "raw", timeout=10)
    assert {p.name: p.read_bytes() for p in (folder / "MIDI").iterdir()} == MIDI_FILES
    assert is_fetched(corpus, tmp_path / "raw")


def test_registry_pins_the_manifest_music_checksums(mirror, manifest):
    music = manifest["music"]
    jsb = get_corpus("jsb_chorales").files[0]
    assert (jsb.mirror_path, jsb.sha256, jsb.size) == (music["jsb_chorales"]["path"], music["jsb_chorales"]["sha256"],
                                                       music["jsb_chorales"]["bytes"])
    midi = get_corpus("nottingham").folders[0]
    assert (midi.mirror_path + "/", midi.listing_sha256, midi.count) == (
        music["nottingham"]["path"], music["nottingham"]["listing_sha256"], music["nottingham"]["files"])
    assert listing_sha256(mirror / midi.mirror_path, midi.suffix) == (midi.listing_sha256, midi.count)
