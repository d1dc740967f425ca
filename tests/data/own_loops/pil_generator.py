"""A loop fed by a plain Python generator that decodes PNG files with PIL, resizes them and
converts each with ``np.array(img, dtype=np.float32)`` on the host, as image tutorials write
it; a linear classifier whose step costs far less than decoding a batch.

usage: python pil_generator.py OUT.json IMAGE_DIR

The images are written into IMAGE_DIR at start. The conversion on the line marked
HOST-CONVERSION works on a PIL image (a host value): host work, not a wait for the device.
"""
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
from PIL import Image

from pipecheck import Monitor

STORED, SIZE, IMAGES, BATCH, STEPS, CLASSES = 192, 128, 64, 32, 50, 10


def write_images(directory):
    rng = np.random.default_rng(0)
    paths = []
    for i in range(IMAGES):
        pixels = rng.integers(0, 256, (STORED, STORED, 3), dtype=np.uint8)
        path = os.path.join(directory, f"img{i:03d}.png")
        Image.fromarray(pixels).save(path)
        paths.append(path)
    return paths


def image_batches(paths, steps):
    for step in range(steps):
        images, labels = [], []
        for j in range(BATCH):
            k = (step * BATCH + j) % len(paths)
            with Image.open(paths[k]) as img:
                img = img.convert("RGB").resize((SIZE, SIZE))
                images.append(np.array(img, dtype=np.float32))  # HOST-CONVERSION
            labels.append(k % CLASSES)
        yield np.stack(images) / 255.0, np.array(labels)


def loss_fn(params, images, labels):
    logits = images.reshape(images.shape[0], -1) @ params["w"] + params["b"]
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], 1))


@jax.jit
def train_step(params, images, labels):
    loss, grads = jax.value_and_grad(loss_fn)(params, images, labels)
    return jax.tree.map(lambda p, g: p - 1e-3 * g, params, grads), {"loss": loss}


def main(out, image_dir):
    paths = write_images(image_dir)
    params = {"w": jnp.zeros((SIZE * SIZE * 3, CLASSES)), "b": jnp.zeros(CLASSES)}
    mon = Monitor(config={"loop": "pil_generator", "batch_size": BATCH})
    for images, labels in mon.batches(image_batches(paths, STEPS)):
        params, metrics = mon.step(train_step, params, images, labels)
    mon.save(out, force=True)
    print(mon.report())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
