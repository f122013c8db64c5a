"""Registry of corpora and their verified fetching.

Every corpus names its canonical archive, the archive members we keep, and the sha256 of every
file; a folder of many small files (the Nottingham MIDI files) is verified as a whole by the sha256 of
its checksum listing (:func:`listing_sha256`). `fetch_corpus` either downloads the archive (``urllib``)
or, when a mirror folder laid out like ``shared/data`` is given (``PAPERLIB_DATA_MIRROR``), copies the
files from there. Either way each file (or folder) is written to a temporary name, verified, and only then
renamed into place, so a checksum mismatch or a truncated download leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

MIRROR_ENV = "PAPERLIB_DATA_MIRROR"
_CHUNK = 1 << 20


class DataError(RuntimeError):
    """A dataset could not be fetched or verified; the message says what to do."""


@dataclass(frozen=True)
class CorpusFile:
    """One file of a corpus: its local name, where it sits in the archive and in a mirror, its checksum."""

    name: str  # file name under data/raw/<corpus>/
    member: str  # path inside the canonical archive
    mirror_path: str  # path relative to a mirror folder laid out like shared/data
    sha256: str | None  # None: no checksum pinned yet (fetch requires allow_unpinned)
    size: int | None = None


@dataclass(frozen=True)
class CorpusFolder:
    """A folder of many files verified as a whole: the sha256 of its listing (:func:`listing_sha256`)."""

    name: str  # folder name under data/raw/<corpus>/
    member: str  # folder inside the canonical archive (only its direct children are kept)
    mirror_path: str  # folder relative to a mirror laid out like shared/data
    listing_sha256: str
    count: int  # number of files
    suffix: str  # only files whose name ends with it belong to the folder


@dataclass(frozen=True)
class Corpus:
    """A corpus: its canonical archive and files, plus the facts the loaders rely on."""

    name: str
    description: str
    url: str
    files: tuple[CorpusFile, ...]
    level: str  # "word", "char" or "piano_roll"
    licence: str
    vocab_size: int | None = None  # including <eos>
    note: str = ""
    folders: tuple[CorpusFolder, ...] = ()

    def file(self, split: str) -> CorpusFile:
        for f in self.files:
            if split in f.name.split("."):
                return f
        raise KeyError(f"corpus {self.name!r} has no split {split!r}")


_MIKOLOV = "http://www.fit.vutbr.cz/~imikolov/rnnlm/simple-examples.tgz"
_WIKITEXT2 = "https://s3.amazonaws.com/research.metamind.io/wikitext/wikitext-2-v1.zip"
_JSB_COMMIT = "9a7f733ddb4ed91f48da64ac7f0f621c34aadd4d"
_NOTTINGHAM_COMMIT = "0992bb6cd864f6d4b90d6663e08c0ef53ffaa08f"

CORPORA: dict[str, Corpus] = {
    "ptb": Corpus(
        name="ptb",
        description="Penn Treebank, word level, Mikolov et al. (2010) preprocessing",
        url=_MIKOLOV,
        level="word",
        licence="LDC (Treebank-3, LDC99T42); Mikolov's preprocessed files are redistributed for research",
        vocab_size=10_000,
        files=(
            CorpusFile("ptb.train.txt", "simple-examples/data/ptb.train.txt", "ptb/ptb.train.txt",
                       "fcea919f6cf83f35d4d00c6cbf08040d13d4155226340912e2fef9c9c4102cbf", 5_101_618),
            CorpusFile("ptb.valid.txt", "simple-examples/data/ptb.valid.txt", "ptb/ptb.valid.txt",
                       "c9fe6985fe0d4ccb578183407d7668fc6066c20700cb4cf87d8ff1cc34df1bf2", 399_782),
            CorpusFile("ptb.test.txt", "simple-examples/data/ptb.test.txt", "ptb/ptb.test.txt",
                       "dd65dff31e70846b2a6030a87482edcd5d199130cdcfa1f3dccbb033728deee0", 449_945),
        ),
    ),
    "ptb_char": Corpus(
        name="ptb_char",
        description="Penn Treebank, character level (Mikolov et al. 2012); '_' marks word boundaries",
        url=_MIKOLOV,
        level="char",
        licence="as ptb",
        vocab_size=50,
        files=(
            CorpusFile("ptb.char.train.txt", "simple-examples/data/ptb.char.train.txt", "ptb/ptb.char.train.txt",
                       "e313d91425e06c4f0a8fb6e881dcce0c291f2a0e9f4dda54833069b122f91da9", 10_034_964),
            CorpusFile("ptb.char.valid.txt", "simple-examples/data/ptb.char.valid.txt", "ptb/ptb.char.valid.txt",
                       "21661f63ec355085879458b6524644d4add5573541b4be14fb52ab2e2e995eb8", 786_084),
            CorpusFile("ptb.char.test.txt", "simple-examples/data/ptb.char.test.txt", "ptb/ptb.char.test.txt",
                       "1ef5607ac3c463b16e38bfe7900dd3bfc91de5a96e0f21e7eab5188b465b8ebe", 884_846),
        ),
    ),
    "wikitext2": Corpus(
        name="wikitext2",
        description="WikiText-2 v1, tokenized (Merity et al. 2016)",
        url=_WIKITEXT2,
        level="word",
        licence="CC BY-SA 3.0",
        vocab_size=33_278,
        note="the canonical archive is reported to be no longer public; use a mirror (PAPERLIB_DATA_MIRROR)",
        files=(
            CorpusFile("wiki.train.tokens", "wikitext-2/wiki.train.tokens", "wikitext-2/wiki.train.tokens",
                       "9e9fa1ad55b1c2c95b08e37dd8e653f638fac2c6de904b79e813611eefbc985f", 10_797_148),
            CorpusFile("wiki.valid.tokens", "wikitext-2/wiki.valid.tokens", "wikitext-2/wiki.valid.tokens",
                       "f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8", 1_121_681),
            CorpusFile("wiki.test.tokens", "wikitext-2/wiki.test.tokens", "wikitext-2/wiki.test.tokens",
                       "d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0", 1_256_449),
        ),
    ),
    # The Hutter Prize files: no verified copy was available to pin a sha256, so fetching them needs
    # allow_unpinned=True (`--allow-unpinned`), which records the checksum it saw next to the file.
    "enwik8": Corpus(
        name="enwik8",
        description="First 10^8 bytes of an English Wikipedia XML dump (Hutter Prize); byte level",
        url="http://mattmahoney.net/dc/enwik8.zip",
        level="char",
        licence="Wikipedia text, CC BY-SA",
        note="split 90M/5M/5M bytes into train/valid/test as is customary",
        files=(CorpusFile("enwik8", "enwik8", "enwik8/enwik8", None, 100_000_000),),
    ),
    "text8": Corpus(
        name="text8",
        description="enwik8 cleaned to lowercase letters and spaces (Mahoney); character level",
        url="http://mattmahoney.net/dc/text8.zip",
        level="char",
        licence="Wikipedia text, CC BY-SA",
        note="split 90M/5M/5M characters into train/valid/test as is customary",
        files=(CorpusFile("text8", "text8", "text8/text8", None, 100_000_000),),
    ),
    # Polyphonic music of Boulanger-Lewandowski et al. (2012), Krause thesis §4.8 and Table 4.6; loaded as
    # piano rolls by paperlib.data.music.
    "jsb_chorales": Corpus(
        name="jsb_chorales",
        description="JSB Chorales at quarter-note resolution, Boulanger-Lewandowski's split (229/76/77 chorales)",
        url=f"https://github.com/czhuang/JSB-Chorales-dataset/archive/{_JSB_COMMIT}.zip",
        level="piano_roll",
        licence="the chorales are public domain; the encoding is research data redistributed with the papers",
        note="canonical origin: JSB Chorales.pickle of Boulanger-Lewandowski's ICML 2012 data page",
        files=(
            CorpusFile("jsb-chorales-quarter.json", f"JSB-Chorales-dataset-{_JSB_COMMIT}/jsb-chorales-quarter.json",
                       "music/jsb-chorales/jsb-chorales-quarter.json",
                       "2db9329f1881a1d3f49703ec556bf1d6f84b4f6c1d702c156536e93cf31e1c91", 407_200),
        ),
    ),
    "nottingham": Corpus(
        name="nottingham",
        description="Nottingham Music Database (cleaned, jukedeck): 1,034 folk tunes as two-track MIDI files",
        url=f"https://github.com/jukedeck/nottingham-dataset/archive/{_NOTTINGHAM_COMMIT}.zip",
        level="piano_roll",
        licence="GNU GPLv3 (the cleaned files); the tunes are traditional",
        note="no split ships with the files; paperlib.data.music defines a deterministic one",
        files=(),
        folders=(
            CorpusFolder("MIDI", f"nottingham-dataset-{_NOTTINGHAM_COMMIT}/MIDI", "music/nottingham/MIDI",
                         "367d720d99626ffdd5b4f09fc45083d5e3bbd6ad259cdc7597b44687569aa8e5", 1034, ".mid"),
        ),
    ),
}


def get_corpus(name: str) -> Corpus:
    try:
        return CORPORA[name]
    except KeyError:
        raise DataError(f"unknown corpus {name!r}; known corpora: {', '.join(CORPORA)}") from None


def pinned_checksums(*names: str) -> dict[str, str]:
    """The pinned sha256 of every file of the named corpora: what `load_corpus` (which verifies them) read.

    Keys are file names for one corpus and ``<corpus>/<file>`` for several; files without a pinned checksum are
    left out. Results record this in their provenance.
    Folders appear under their name with the sha256 of their listing.
    """
    prefix = len(names) > 1
    sums = {}
    for name in names:
        corpus = get_corpus(name)
        entries = [(f.name, f.sha256) for f in corpus.files if f.sha256]
        entries += [(d.name, d.listing_sha256) for d in corpus.folders]
        sums.update({(f"{name}/{key}" if prefix else key): sha for key, sha in entries})
    return sums


def sha256_of(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def listing_sha256(folder: str | os.PathLike, suffix: str) -> tuple[str, int]:
    """(sha256 of the folder's listing, number of files) over the files of ``folder`` ending in ``suffix``.

    The listing is one line ``<sha256 of file>  <file name>\\n`` per file, files sorted by name, which is what
    ``LC_ALL=C sha256sum $(ls | LC_ALL=C sort)`` prints; ``shared/data/MANIFEST.json`` pins its sha256.
    """
    paths = sorted(p for p in Path(folder).iterdir() if p.is_file() and p.name.endswith(suffix))
    listing = "".join(f"{sha256_of(p)}  {p.name}\n" for p in paths)
    return hashlib.sha256(listing.encode("utf-8")).hexdigest(), len(paths)


def corpus_dir(name: str, root: str | os.PathLike) -> Path:
    return Path(root) / name


def is_fetched(corpus: Corpus, root: str | os.PathLike) -> bool:
    """True when every file of `corpus` is under `root` with the right checksum."""
    folder = corpus_dir(corpus.name, root)
    for f in corpus.files:
        path = folder / f.name
        if not path.is_file():
            return False
        expected = f.sha256 or _recorded_sha(path)
        if expected is None or sha256_of(path) != expected:
            return False
    for spec in corpus.folders:
        path = folder / spec.name
        if not path.is_dir() or listing_sha256(path, spec.suffix) != (spec.listing_sha256, spec.count):
            return False
    return True


def fetch_corpus(
    corpus: Corpus | str,
    root: str | os.PathLike,
    mirror: str | os.PathLike | None = None,
    allow_unpinned: bool = False,
    timeout: float = 60.0,
) -> Path:
    """Download (or copy from `mirror`) and verify every file of `corpus` into `root/<name>/`.

    Files already present with the right checksum are kept. Raises :class:`DataError` with a
    one-line reason on a missing mirror, a network failure, a missing archive member, a size or
    checksum mismatch; in every such case no partially written file is left behind.
    """
    corpus = get_corpus(corpus) if isinstance(corpus, str) else corpus
    unpinned = [f.name for f in corpus.files if f.sha256 is None]
    if unpinned and not allow_unpinned:
        raise DataError(
            f"{corpus.name}: no sha256 is pinned for {', '.join(unpinned)}; "
            "fetch with allow_unpinned=True (--allow-unpinned) to accept and record what you download"
        )
    folder = corpus_dir(corpus.name, root)
    folder.mkdir(parents=True, exist_ok=True)
    if is_fetched(corpus, root):
        return folder
    if mirror is None:
        mirror = os.environ.get(MIRROR_ENV) or None
    if mirror is not None:
        _fetch_from_mirror(corpus, folder, Path(mirror))
    else:
        _fetch_from_archive(corpus, folder, timeout)
    return folder


def _fetch_from_mirror(corpus: Corpus, folder: Path, mirror: Path) -> None:
    if not mirror.is_dir():
        raise DataError(f"data mirror {mirror} does not exist (set by {MIRROR_ENV} or --mirror)")
    for f in corpus.files:
        source = mirror / f.mirror_path
        if not source.is_file():
            raise DataError(f"{corpus.name}: {f.mirror_path} is missing from the mirror {mirror}")
        with open(source, "rb") as fh:
            _write_verified(fh, folder / f.name, f, corpus.name)
    for spec in corpus.folders:
        source = mirror / spec.mirror_path
        if not source.is_dir():
            raise DataError(f"{corpus.name}: folder {spec.mirror_path} is missing from the mirror {mirror}")
        members = sorted(p for p in source.iterdir() if p.is_file() and p.name.endswith(spec.suffix))
        _write_verified_folder(((p.name, p.open("rb")) for p in members), folder / spec.name, spec, corpus.name)


def _fetch_from_archive(corpus: Corpus, folder: Path, timeout: float) -> None:
    with tempfile.TemporaryDirectory(dir=folder, prefix=".download-") as tmp:
        archive = Path(tmp) / "archive"
        try:
            with urllib.request.urlopen(corpus.url, timeout=timeout) as response, open(archive, "wb") as out:
                shutil.copyfileobj(response, out, _CHUNK)
        except (urllib.error.URLError, OSError, TimeoutError) as err:
            reason = getattr(err, "reason", err)
            raise DataError(
                f"{corpus.name}: could not download {corpus.url} ({reason}); "
                f"without network, point {MIRROR_ENV} at a local copy laid out like shared/data"
            ) from None
        for f in corpus.files:
            with _open_member(archive, f.member, corpus) as fh:
                _write_verified(fh, folder / f.name, f, corpus.name)
        for spec in corpus.folders:
            _write_verified_folder(_folder_members(archive, spec.member, corpus), folder / spec.name, spec,
                                   corpus.name)


def _normalise(member: str) -> str:
    while member.startswith("./"):
        member = member[2:]
    return member.rstrip("/")


class _open_member:
    """Context manager yielding a binary file object for `member` of a .zip, .tar(.gz) or bare file."""

    def __init__(self, archive: Path, member: str, corpus: Corpus):
        self.archive, self.member, self.corpus = archive, _normalise(member), corpus
        self._closers: list = []

    def __enter__(self) -> io.BufferedIOBase:
        try:
            if zipfile.is_zipfile(self.archive):
                zf = zipfile.ZipFile(self.archive)
                self._closers.append(zf)
                names = {_normalise(n): n for n in zf.namelist()}
                if self.member in names:
                    return zf.open(names[self.member])
            elif tarfile.is_tarfile(self.archive):
                tf = tarfile.open(self.archive)
                self._closers.append(tf)
                for info in tf:
                    if _normalise(info.name) == self.member and info.isfile():
                        fh = tf.extractfile(info)
                        if fh is not None:
                            return fh
            else:
                raise DataError(f"{self.corpus.name}: {self.corpus.url} is not a zip or tar archive")
        except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as err:
            raise DataError(f"{self.corpus.name}: archive from {self.corpus.url} is corrupt ({err})") from None
        raise DataError(f"{self.corpus.name}: archive from {self.corpus.url} has no member {self.member!r}")

    def __exit__(self, *exc) -> None:
        for closer in self._closers:
            closer.close()


def _write_verified(source: io.BufferedIOBase, target: Path, spec: CorpusFile, corpus: str) -> None:
    """Stream `source` into a temp file beside `target`, check size and sha256, then rename."""
    digest = hashlib.sha256()
    size = 0
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                for chunk in iter(lambda: source.read(_CHUNK), b""):
                    digest.update(chunk)
                    size += len(chunk)
                    out.write(chunk)
            except (OSError, EOFError, zipfile.BadZipFile, tarfile.TarError) as err:
                raise DataError(f"{corpus}: reading {spec.name} failed ({err}); the source is truncated or corrupt") from None
        if spec.size is not None and size != spec.size:
            raise DataError(f"{corpus}: {spec.name} has {size} bytes, expected {spec.size} (truncated or wrong file)")
        seen = digest.hexdigest()
        if spec.sha256 is not None and seen != spec.sha256:
            raise DataError(f"{corpus}: checksum mismatch for {spec.name}: sha256 {seen}, expected {spec.sha256}")
        os.replace(tmp, target)
        if spec.sha256 is None:
            _record_sha(target, seen)
    finally:
        tmp.unlink(missing_ok=True)


def _folder_members(archive: Path, member: str, corpus: Corpus) -> Iterator[tuple[str, io.BufferedIOBase]]:
    """(file name, open file) of every direct child file of folder ``member`` in a .zip or .tar(.gz) archive."""
    prefix = _normalise(member) + "/"
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as zf:
                for name in sorted(zf.namelist()):
                    rest = _normalise(name)[len(prefix):]
                    if _normalise(name).startswith(prefix) and rest and "/" not in rest and not name.endswith("/"):
                        with zf.open(name) as fh:
                            yield rest, fh
        elif tarfile.is_tarfile(archive):
            with tarfile.open(archive) as tf:
                for info in tf:
                    rest = _normalise(info.name)[len(prefix):]
                    if _normalise(info.name).startswith(prefix) and rest and "/" not in rest and info.isfile():
                        fh = tf.extractfile(info)
                        if fh is not None:
                            yield rest, fh
        else:
            raise DataError(f"{corpus.name}: {corpus.url} is not a zip or tar archive")
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as err:
        raise DataError(f"{corpus.name}: archive from {corpus.url} is corrupt ({err})") from None


def _write_verified_folder(members: Iterable[tuple[str, io.BufferedIOBase]], target: Path, spec: CorpusFolder,
                           corpus: str) -> None:
    """Copy ``members`` (name, file) into a temporary folder beside ``target``, check the listing, then rename.

    A wrong count or listing checksum leaves nothing behind; an old, failing copy of the folder is replaced.
    """
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part"))
    try:
        for name, source in members:
            if not name.endswith(spec.suffix):
                continue
            try:
                with source, open(tmp / name, "wb") as out:
                    shutil.copyfileobj(source, out, _CHUNK)
            except (OSError, EOFError, zipfile.BadZipFile, tarfile.TarError) as err:
                raise DataError(f"{corpus}: reading {spec.name}/{name} failed ({err}); the source is truncated "
                                "or corrupt") from None
        seen, count = listing_sha256(tmp, spec.suffix)
        if count != spec.count:
            raise DataError(f"{corpus}: folder {spec.name} has {count} {spec.suffix} files, expected {spec.count}")
        if seen != spec.listing_sha256:
            raise DataError(f"{corpus}: checksum mismatch for folder {spec.name}: listing sha256 {seen}, "
                            f"expected {spec.listing_sha256}")
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def _record_sha(path: Path, sha: str) -> None:
    path.with_name(path.name + ".sha256").write_text(f"{sha}  {path.name}\n")


def _recorded_sha(path: Path) -> str | None:
    record = path.with_name(path.name + ".sha256")
    return record.read_text().split()[0] if record.is_file() else None
