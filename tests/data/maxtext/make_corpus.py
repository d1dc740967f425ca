"""Write ArrayRecord files of serialized ``tf.train.Example`` records with a ``text`` feature,
as MaxText's Grain pipeline reads them (``grain_file_type=arrayrecord``), without TensorFlow:
MaxText ships the ``Example`` proto.

    python make_corpus.py OUT_DIR --files 4 --docs 200 --words 2000   # raw text
    python make_corpus.py OUT_DIR --tokens 100                        # pre-tokenized ids
    python make_corpus.py OUT_DIR --tokenizer OUT_DIR/tok             # + OUT_DIR/tok.model

Run it with MaxText's Python (it imports ``maxtext`` and ``array_record``). Raw text
documents are long sentences of random words (seeded), so on-the-fly sentencepiece
tokenization does real work; pre-tokenized documents are int64 id lists below 256.
"""

from __future__ import annotations

import argparse
import pathlib
import random

WORDS = ("the quick brown fox jumps over lazy dog pipeline compute input bound worker thread "
         "buffer prefetch tokenizer sentence piece model train step device host sync batch "
         "shard mesh array record grain maxtext profile verdict measure").split()


def example_bytes(text: str | None = None, ids: list[int] | None = None) -> bytes:
    # lazy: MaxText's proto, importable only in MaxText's environment
    from maxtext.input_pipeline.protos import example_pb2

    ex = example_pb2.Example()
    feature = ex.features.feature["text"]
    if ids is not None:
        feature.int64_list.value.extend(ids)
    else:
        assert text is not None
        feature.bytes_list.value.append(text.encode())
    return ex.SerializeToString()


def write_corpus(out: pathlib.Path, files: int = 4, docs: int = 200, words: int = 2000,
                 tokens: int = 0, seed: int = 0) -> list[pathlib.Path]:
    """``files`` ArrayRecord files of ``docs`` documents each: raw text of ``words`` words,
    or (``tokens`` > 0) pre-tokenized id lists of that length."""
    from array_record.python.array_record_module import ArrayRecordWriter

    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for f in range(files):
        path = out / f"corpus-{f:05d}-of-{files:05d}.array_record"
        writer = ArrayRecordWriter(str(path), "group_size:1")
        for _ in range(docs):
            if tokens:
                writer.write(example_bytes(ids=[rng.randrange(1, 256) for _ in range(tokens)]))
            else:
                writer.write(example_bytes(" ".join(rng.choice(WORDS) for _ in range(words))))
        writer.close()
        paths.append(path)
    return paths


def train_tokenizer(prefix: pathlib.Path, vocab: int = 64, seed: int = 0) -> pathlib.Path:
    """A small sentencepiece model (``vocab`` pieces) of the corpus's words, as a user trains
    one for their data: ``PREFIX.model``, for MaxText's ``tokenizer_path``."""
    import sentencepiece as spm

    rng = random.Random(seed)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    text = prefix.with_suffix(".txt")
    text.write_text("\n".join(" ".join(rng.choice(WORDS) for _ in range(50))
                              for _ in range(2000)))
    spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(prefix), vocab_size=vocab,
                                   model_type="unigram", character_coverage=1.0, pad_id=0,
                                   unk_id=1, bos_id=2, eos_id=3, minloglevel=2)
    return prefix.with_suffix(".model")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=pathlib.Path)
    p.add_argument("--files", type=int, default=4)
    p.add_argument("--docs", type=int, default=200)
    p.add_argument("--words", type=int, default=2000)
    p.add_argument("--tokens", type=int, default=0)
    p.add_argument("--tokenizer", type=pathlib.Path, default=None,
                   help="also train a 64-piece sentencepiece model: PREFIX.model")
    a = p.parse_args()
    if a.tokenizer is not None:
        print(train_tokenizer(a.tokenizer))
    for path in write_corpus(a.out, a.files, a.docs, a.words, a.tokens):
        print(path)


if __name__ == "__main__":
    main()
