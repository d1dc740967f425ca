"""The demo workload: a small decoder-only transformer LM (JAX + optax) on demo text.

Sized to take tens of milliseconds per step on a 2-core CPU. Tokens are bytes
(see ``pipecheck.data.tokenizer``): vocabulary = special tokens + 256 byte values.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable

import numpy as np

from pipecheck.config import COMMON_KEYS, Key, RunConfig
from pipecheck.data.grain_pipeline import BatchedExamples
from pipecheck.data.sources import open_records
from pipecheck.data.tokenizer import TokenizeAndPack
from pipecheck.errors import ConfigError
from pipecheck.step_types import Batch, PyTree
from pipecheck.workloads.base import Workload, spec_of
from pipecheck.workloads.devices import (
    batch_sharding,
    data_mesh,
    host_batch_size,
    replicated,
    shard_by_process,
)

if TYPE_CHECKING:  # pragma: no cover
    import jax
    import optax

KEYS: tuple[Key, ...] = (
    *(Key(k.name, k.type, 8, k.help, k.choices, k.minimum) if k.name == "batch_size" else k
      for k in COMMON_KEYS),
    Key("seq_len", int, 128, "tokens per example (documents are packed to this length)",
        minimum=8),
    Key("d_model", int, 128, "model width", minimum=8),
    Key("n_layers", int, 2, "transformer blocks", minimum=1),
    Key("n_heads", int, 4, "attention heads (must divide d_model)", minimum=1),
    Key("d_ff", int, 512, "feed-forward width", minimum=8),
    Key("learning_rate", float, 3e-4, "AdamW learning rate", minimum=0),
    Key("num_docs", int, 4000, "documents in the generated demo corpus", minimum=10),
    Key("data_dir", str, "", "tfds data_dir for the demo corpus (default: "
        "$PIPECHECK_DATA_DIR, else the user's cache dir); for source tfds:NAME, the "
        "data_dir holding NAME (default: tfds's own)"),
    Key("source", str, "demo", "where the text comes from: demo (generated corpus), "
        "tfds:NAME (a tfds data set prepared under data_dir), or a path to ArrayRecord "
        "file(s) whose records are UTF-8 text"),
    Key("text_key", str, "text", "the feature holding the text, for tfds sources"),
    Key("split", str, "train", "the split to read, for tfds sources"),
)

VOCAB_SIZE = 260
"""4 special ids (pad, bos, eos, unused) + 256 byte values."""


def init_params(config: RunConfig, seed: int) -> PyTree:
    """Parameters as a pytree of numpy arrays (placed on devices by the caller)."""
    rng = np.random.default_rng(seed)
    d, f, L = config["d_model"], config["d_ff"], config["n_layers"]

    def dense(n_in: int, n_out: int) -> np.ndarray:
        return (rng.standard_normal((n_in, n_out)) / math.sqrt(n_in)).astype(np.float32)

    params: PyTree = {
        "embed": (rng.standard_normal((VOCAB_SIZE, d)) * 0.02).astype(np.float32),
        "pos": (rng.standard_normal((config["seq_len"], d)) * 0.02).astype(np.float32),
        "final_norm": np.ones((d,), np.float32),
        "layers": [],
    }
    for _ in range(L):
        params["layers"].append({
            "norm1": np.ones((d,), np.float32),
            "qkv": dense(d, 3 * d),
            "out": dense(d, d),
            "norm2": np.ones((d,), np.float32),
            "up": dense(d, f),
            "down": dense(f, d),
        })
    return params


def _rms_norm(x: jax.Array, scale: jax.Array) -> jax.Array:
    import jax.numpy as jnp  # lazy: keeps `import pipecheck` free of JAX

    return x * jnp.reciprocal(jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6)) * scale


def forward(params: PyTree, tokens: jax.Array, n_heads: int) -> jax.Array:
    """Logits for next-token prediction, shape (batch, seq, vocab)."""
    import jax
    import jax.numpy as jnp

    b, t = tokens.shape
    x = params["embed"][tokens] + params["pos"][:t]
    d = x.shape[-1]
    hd = d // n_heads
    mask = jnp.tril(jnp.ones((t, t), bool))
    for layer in params["layers"]:
        h = _rms_norm(x, layer["norm1"])
        q, k, v = jnp.split(h @ layer["qkv"], 3, axis=-1)
        q, k, v = (a.reshape(b, t, n_heads, hd) for a in (q, k, v))
        att = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(hd)
        att = jax.nn.softmax(jnp.where(mask, att, -1e9), axis=-1)
        o = jnp.einsum("bhqk,bkhd->bqhd", att, v).reshape(b, t, d)
        x = x + o @ layer["out"]
        h = _rms_norm(x, layer["norm2"])
        x = x + jax.nn.gelu(h @ layer["up"]) @ layer["down"]
    x = _rms_norm(x, params["final_norm"])
    return x @ params["embed"].T


def make_train_step(
    config: RunConfig,
) -> tuple[Callable[[PyTree, Batch], tuple[PyTree, PyTree]], optax.GradientTransformation]:
    import jax
    import jax.numpy as jnp
    import optax

    n_heads = config["n_heads"]
    optimizer = optax.adamw(config["learning_rate"])

    def loss_fn(params: PyTree, tokens: jax.Array) -> jax.Array:
        logits = forward(params, tokens[:, :-1], n_heads)
        targets = tokens[:, 1:]
        losses = optax.softmax_cross_entropy_with_integer_labels(logits, targets)
        weights = (targets != 0).astype(jnp.float32)
        return jnp.sum(losses * weights) / jnp.maximum(jnp.sum(weights), 1.0)

    def train_step(state: PyTree, batch: Batch) -> tuple[PyTree, PyTree]:
        loss, grads = jax.value_and_grad(loss_fn)(state["params"], batch["tokens"])
        updates, opt_state = optimizer.update(grads, state["opt_state"], state["params"])
        params = optax.apply_updates(state["params"], updates)
        return {"params": params, "opt_state": opt_state, "step": state["step"] + 1}, {"loss": loss}

    return train_step, optimizer


def make_dataset(config: RunConfig) -> BatchedExamples:
    """The demo workload's input pipeline, per example: source, shuffle, repeat, tokenize+pack.

    ``build_iter_dataset`` reads it with ``ReadOptions(num_threads)``, batches it to
    ``batch_size`` and adds workers.
    """
    import grain  # lazy: keeps `import pipecheck` free of Grain (and its JAX import)

    source = open_records(config["source"], num_docs=config["num_docs"], seed=config["seed"],
                          data_dir=config["data_dir"], split=config["split"])
    # One process per host: each reads its own shard of the records.
    examples = (
        shard_by_process(grain.MapDataset.source(source))
        .seed(config["seed"])
        .shuffle()
        .repeat()
        .map(TokenizeAndPack(config["seq_len"], config["text_key"]))
    )
    return BatchedExamples(examples, host_batch_size(config["batch_size"], config["devices"]))


def build(config: RunConfig) -> Workload:
    import jax
    import jax.numpy as jnp

    if config["d_model"] % config["n_heads"]:
        raise ConfigError(
            f"n_heads={config['n_heads']} must divide d_model={config['d_model']}"
        )
    n_dev = config["devices"]
    mesh = data_mesh(n_dev)
    local_batch = host_batch_size(config["batch_size"], n_dev)
    rep = replicated(mesh)
    train_step, optimizer = make_train_step(config)
    host_params = init_params(config, config["seed"])
    rng = np.random.default_rng(config["seed"] + 1)
    example = {
        "tokens": rng.integers(4, VOCAB_SIZE, (local_batch, config["seq_len"]),
                               dtype=np.int32)
    }
    spec = spec_of(example, batch_sharding(mesh))

    def init_state() -> PyTree:
        params = jax.device_put(host_params, rep)
        opt_state = jax.device_put(optimizer.init(params), rep)
        return {"params": params, "opt_state": opt_state, "step": jax.device_put(jnp.int32(0), rep)}

    return Workload(
        name="demo",
        config=config,
        mesh=mesh,
        train_step=jax.jit(train_step),
        train_step_name="train_step",
        init_state=init_state,
        batch_spec=spec,
        host_batch=lambda: example,
        dataset=lambda: make_dataset(config),
        tokens_key="tokens",
    )
