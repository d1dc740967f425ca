"""The demo text corpus: a tensorflow-datasets builder that generates documents locally.

No network and no TensorFlow: ``PipecheckDemoText`` is a
``tfds.core.GeneratorBasedBuilder`` whose documents come from a seeded generator
with a realistic shape: words drawn from a Zipf distribution over a vocabulary
whose frequent words are short, letters with English frequencies, sentences and
paragraphs, a few numbers and non-ASCII words, and log-normal document lengths
(median ~380 words or ~1.6 KB, with a heavy tail). It is written as ArrayRecord with
``download_and_prepare(file_format="array_record")`` under
``<data root>/demo_text/n<num_docs>-s<seed>/`` and read back with
``tfds.data_source``. The data root is the ``data_dir`` key, else
``$PIPECHECK_DATA_DIR``, else the user's cache dir (``~/.cache/pipecheck``).

It is built on first use (progress bar on stderr), reused afterwards, and
rebuilt when a build was interrupted (no ``dataset_info.json`` or a missing
shard). A corpus whose files exist but cannot be read is a ``DataError``
naming the directory and how to rebuild it.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import pathlib
import shutil
import sys
from typing import TYPE_CHECKING, Iterator

import numpy as np
import tensorflow_datasets as tfds
from tqdm import tqdm

from pipecheck.errors import DataError, one_line

if TYPE_CHECKING:  # pragma: no cover
    from pipecheck.data.sources import RecordSource

NAME = "pipecheck_demo_text"
CORPUS_VERSION = "1.0.0"
SPLIT = "train"

VOCAB_WORDS = 6000
ZIPF_EXPONENT = 1.07
DOC_WORDS_MEDIAN = 380
DOC_WORDS_SIGMA = 0.9
DOC_WORDS_RANGE = (8, 4000)
SENTENCE_END_P = 0.065
COMMA_P = 0.05
PARAGRAPH_P = 0.15
"""Share of sentence ends that also end a paragraph."""
NUMBER_P = 0.01
NON_ASCII_WORDS = ("café", "naïve", "über", "façade", "résumé", "Zürich", "São", "—", "€")
NON_ASCII_P = 0.004
LETTERS = "etaoinshrdlcumwfgypbvkjxqz"
LETTER_FREQ = np.array([12.7, 9.1, 8.2, 7.5, 7.0, 6.7, 6.3, 6.1, 6.0, 4.3, 4.0, 2.8, 2.8, 2.4,
                        2.4, 2.2, 2.0, 2.0, 1.9, 1.5, 1.0, 0.8, 0.15, 0.15, 0.1, 0.07])


def data_root(data_dir: str = "") -> pathlib.Path:
    """Where pipecheck keeps generated data: ``data_dir``, $PIPECHECK_DATA_DIR, or the cache."""
    if data_dir:
        return pathlib.Path(data_dir).expanduser()
    env = os.environ.get("PIPECHECK_DATA_DIR")
    if env:
        return pathlib.Path(env).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(pathlib.Path.home() / ".cache")
    return pathlib.Path(cache) / "pipecheck"


def corpus_dir(num_docs: int, seed: int, data_dir: str = "") -> pathlib.Path:
    """The tfds ``data_dir`` of one corpus (the builder writes NAME/VERSION below it)."""
    return data_root(data_dir) / "demo_text" / f"n{num_docs}-s{seed}"


def _vocabulary(rng: np.random.Generator) -> np.ndarray:
    """VOCAB_WORDS distinct words, most frequent (rank 0) first and shortest."""
    p = LETTER_FREQ / LETTER_FREQ.sum()
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < VOCAB_WORDS:
        n = int(np.clip(1 + rng.gamma(4.0, 1.5), 1, 16))
        w = "".join(rng.choice(list(LETTERS), size=n, p=p))
        if w not in seen:
            seen.add(w)
            words.append(w)
    # Frequent words are short, as in natural language (loosely: length plus noise).
    order = np.argsort([len(w) + rng.normal(0, 2.0) for w in words], kind="stable")
    return np.array(words, dtype=object)[order]


def generate_documents(num_docs: int, seed: int) -> Iterator[str]:
    """The corpus's documents, deterministic in (num_docs, seed)."""
    rng = np.random.default_rng(seed)
    vocab = _vocabulary(rng)
    ranks = np.arange(1, VOCAB_WORDS + 1, dtype=float)
    word_p = ranks ** -ZIPF_EXPONENT
    word_p /= word_p.sum()
    lengths = np.clip(
        rng.lognormal(np.log(DOC_WORDS_MEDIAN), DOC_WORDS_SIGMA, size=num_docs),
        *DOC_WORDS_RANGE,
    ).astype(int)
    capitalized = np.array([w.capitalize() for w in vocab], dtype=object)
    # rng.choice(VOCAB_WORDS, size=n, p=word_p) draws exactly this, computing the cdf of
    # the 6,000 words again for every document
    cdf = word_p.cumsum()
    cdf /= cdf[-1]
    for n in lengths:
        ids = cdf.searchsorted(rng.random(n), side="right")
        ends = rng.random(n) < SENTENCE_END_P
        ends[-1] = True
        starts = np.concatenate([[True], ends[:-1]])
        words = np.where(starts, capitalized[ids], vocab[ids])
        extra = rng.random(n)
        numbers = extra < NUMBER_P
        if numbers.any():
            words[numbers] = [str(v) for v in rng.integers(0, 10_000, numbers.sum())]
        special = (extra >= NUMBER_P) & (extra < NUMBER_P + NON_ASCII_P)
        if special.any():
            words[special] = rng.choice(np.array(NON_ASCII_WORDS, dtype=object), special.sum())
        punct = np.full(n, "", dtype=object)
        punct[rng.random(n) < COMMA_P] = ","
        punct[ends] = "."
        para = ends & (rng.random(n) < PARAGRAPH_P)
        punct[para] = ".\n\n"
        yield " ".join((words + punct).tolist()).replace("\n\n ", "\n\n").rstrip()


class PipecheckDemoText(tfds.core.GeneratorBasedBuilder):  # type: ignore[misc]
    """Generated English-like documents (see the module docstring)."""

    VERSION = tfds.core.Version(CORPUS_VERSION)
    RELEASE_NOTES = {CORPUS_VERSION: "Generated locally by pipecheck."}
    # No checksums file: nothing is downloaded. (tfds would otherwise look for one
    # next to this module through importlib_resources, which it does not require.)
    code_path = None

    def __init__(self, *, num_docs: int = 4000, seed: int = 0, progress: bool = False,
                 **kwargs: object) -> None:
        self._num_docs = num_docs
        self._seed = seed
        self._progress = progress
        super().__init__(**kwargs)

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(
            builder=self,
            description="English-like documents generated by pipecheck (no download).",
            features=tfds.features.FeaturesDict({"text": tfds.features.Text()}),
        )

    def _split_generators(
        self, dl_manager: tfds.download.DownloadManager,
    ) -> dict[str, Iterator[tuple[int, dict[str, str]]]]:
        del dl_manager
        return {SPLIT: self._generate_examples()}

    def _generate_examples(self) -> Iterator[tuple[int, dict[str, str]]]:
        docs = generate_documents(self._num_docs, self._seed)
        bar = tqdm(docs, total=self._num_docs, desc="pipecheck: generating the demo corpus",
                   unit=" docs", file=sys.stderr, leave=False,
                   disable=True if not self._progress else None)  # None: only on a terminal
        for i, text in enumerate(bar):
            yield i, {"text": text}


def is_complete(root: pathlib.Path) -> bool:
    """True when a finished build is in ``root``: dataset_info.json and every shard file."""
    version_dir = root / NAME / CORPUS_VERSION
    if not (version_dir / "dataset_info.json").is_file():
        return False
    shards = list(version_dir.glob(f"{NAME}-{SPLIT}.array_record-*"))
    return bool(shards) and all(s.stat().st_size > 0 for s in shards)


def rebuild_hint(root: pathlib.Path) -> str:
    return f"delete it (rm -rf {root}) and run again to rebuild it"


def ensure_corpus(num_docs: int, seed: int, data_dir: str = "",
                  progress: bool = True) -> pathlib.Path:
    """Build the corpus unless a complete one exists; return its tfds data_dir."""
    root = corpus_dir(num_docs, seed, data_dir)
    if is_complete(root):
        return root
    try:
        root.mkdir(parents=True, exist_ok=True)
        lock = open(root / ".lock", "w")  # noqa: SIM115 - held for the whole build
    except OSError as e:
        raise DataError(f"cannot create the demo corpus directory {root}: {e.strerror}; "
                        "set PIPECHECK_DATA_DIR or data_dir to a writable directory") from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another pipecheck may be building the same corpus
        if is_complete(root):
            return root
        _build(root, num_docs, seed, progress)
    if not is_complete(root):
        raise DataError(
            f"building the demo corpus in {root} did not complete; {rebuild_hint(root)}")
    return root


def _build(root: pathlib.Path, num_docs: int, seed: int, progress: bool) -> None:
    shutil.rmtree(root / NAME, ignore_errors=True)  # an interrupted or partial build
    builder = PipecheckDemoText(data_dir=str(root), num_docs=num_docs, seed=seed, progress=progress)
    tfds.display_progress_bar(False)
    # tfds prints "Downloading and preparing ..." on stdout, which belongs to the report.
    with contextlib.redirect_stdout(io.StringIO()):
        builder.download_and_prepare(file_format="array_record")


def open_source(num_docs: int, seed: int, data_dir: str = "",
                progress: bool = True) -> RecordSource:
    """``tfds.data_source`` over the corpus (built if needed), checked to be readable."""
    root = ensure_corpus(num_docs, seed, data_dir, progress)
    try:
        source = tfds.data_source(NAME, split=SPLIT, data_dir=str(root), download=False)
        n = len(source)
        if n != num_docs:
            raise ValueError(f"it holds {n} documents, expected {num_docs}")
        source[0]
        source[n - 1]
    except Exception as e:  # noqa: BLE001 - any failure to read means a corrupt corpus
        raise DataError(f"the demo corpus in {root} is corrupt ({type(e).__name__}: "
                        f"{one_line(e, 200)}); "
                        f"{rebuild_hint(root)}") from None
    return source
