"""A MaxText-shaped input pipeline and a tiny language model, as a user writes them:
ArrayRecord of JSON -> shuffle -> repeat -> parse and tokenize ->
to_iter_dataset(grain.ReadOptions(num_threads=4, prefetch_buffer_size=PREFETCH)) ->
first-fit packing -> batch. PREFETCH is ``params.prefetch`` (64 when not given).

Tests copy this file into a directory outside the repository and off ``sys.path``."""
import json
import os

import grain
import jax
import jax.numpy as jnp
import numpy as np

SEQ = 32
VOCAB = 256


def write_corpus(path, n=400):
    from array_record.python.array_record_module import ArrayRecordWriter

    writer = ArrayRecordWriter(path, "group_size:1")
    rng = np.random.default_rng(0)
    for i in range(n):
        words = " ".join(f"w{rng.integers(0, 999)}" for _ in range(rng.integers(3, 20)))
        writer.write(json.dumps({"id": i, "text": words}).encode())
    writer.close()


class ParseAndTokenize(grain.transforms.Map):
    def map(self, record):
        text = json.loads(record)["text"]
        ids = np.frombuffer(text.encode(), np.uint8).astype(np.int32)[:SEQ]
        return {"inputs": ids, "targets": np.roll(ids, -1)}


def dataset(config):
    path = config["params"]["corpus"]
    if not os.path.exists(path):
        write_corpus(path)
    source = grain.sources.ArrayRecordDataSource([path])
    read = grain.ReadOptions(num_threads=4,
                             prefetch_buffer_size=config["params"].get("prefetch", 64))
    ds = (grain.MapDataset.source(source).seed(0).shuffle().repeat().map(ParseAndTokenize())
          .to_iter_dataset(read))
    ds = grain.experimental.FirstFitPackIterDataset(
        ds, length_struct={"inputs": SEQ, "targets": SEQ}, num_packing_bins=4)
    return ds.batch(config["batch_size"], drop_remainder=True)


def init(config):
    rng = np.random.default_rng(0)
    return {"emb": rng.standard_normal((VOCAB, 16)).astype(np.float32) * 0.1,
            "out": rng.standard_normal((16, VOCAB)).astype(np.float32) * 0.1}


@jax.jit
def train_step(state, batch):
    def loss_fn(p):
        logits = p["emb"][batch["inputs"]] @ p["out"]
        logp = jax.nn.log_softmax(logits)
        return -jnp.mean(jnp.take_along_axis(logp, batch["targets"][..., None], -1))

    loss, g = jax.value_and_grad(loss_fn)(state)
    return jax.tree.map(lambda p, d: p - 0.1 * d, state, g), {"loss": loss}
