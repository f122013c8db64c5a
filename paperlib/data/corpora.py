"""Registry of corpora and their verified fetching.

Every corpus names its canonical archive, the archive members we keep, and the sha256 of every
file. `fetch_corpus` either downloads the archive (``urllib``) or, when a mirror folder laid out
like ``shared/data`` is given (``PAPERLIB_DATA_MIRROR``), copies the files from there. Either way
each file is written to a temporary name, verified, and only then renamed into place, so a
checksum mismatch or a truncated download leaves nothing behind.
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
class Corpus:
    """A corpus: its canonical archive and files, plus the facts the loaders rely on."""

    name: str
    description: str
    url: str
    files: tuple[CorpusFile, ...]
    level: str  # "word" or "char"
    licence: str
    vocab_size: int | None = None  # including <eos>
    note: str = ""

    def file(self, split: str) -> CorpusFile:
        for f in self.files:
            if split in f.name.split("."):
                return f
        raise KeyError(f"corpus {self.name!r} has no split {split!r}")


_MIKOLOV = "http://www.fit.vutbr.cz/~imikolov/rnnlm/simple-examples.tgz"
_WIKITEXT2 = "https://s3.amazonaws.com/research.metamind.io/wikitext/wikitext-2-v1.zip"

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
    """
    prefix = len(names) > 1
    return {(f"{name}/{f.name}" if prefix else f.name): f.sha256
            for name in names for f in get_corpus(name).files if f.sha256}


def sha256_of(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


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


def _record_sha(path: Path, sha: str) -> None:
    path.with_name(path.name + ".sha256").write_text(f"{sha}  {path.name}\n")


def _recorded_sha(path: Path) -> str | None:
    record = path.with_name(path.name + ".sha256")
    return record.read_text().split()[0] if record.is_file() else None
