"""The Ray Data embedding backend on a local Ray instance gives what local embedding gives, into the same cache."""
from __future__ import annotations

import numpy as np
import pytest

ray = pytest.importorskip("ray")

import torch  # noqa: E402

from hibug_core.embeddings.base import load_rgb  # noqa: E402
from hibug_core.embeddings.compute import embed_project  # noqa: E402
from hibug_core.embeddings.ray_backend import embed_with_ray  # noqa: E402
from hibug_core.embeddings.registry import encoder_key, load_encoder  # noqa: E402


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    yield
    ray.shutdown()


@pytest.mark.slow
def test_ray_embeddings_match_local_ones_and_fill_the_cache(colour_project, local_ray):
    on_ray = embed_with_ray(colour_project, "tiny-open_clip", batch_size=4, actors=2)
    parts = colour_project.arrays.names(f"embeddings/{encoder_key('tiny-open_clip')}/")
    assert on_ray.embedding.shape == (12, 64) and parts
    encoder = load_encoder("tiny-open_clip")
    paths = colour_project.samples()["image_path"]
    direct = encoder.encode_images(torch.stack([encoder.transform(load_rgb(p)) for p in paths]))["embedding"]
    assert np.allclose(on_ray.embedding, direct, atol=2e-3)  # stored as float16
    local = embed_project(colour_project, "tiny-open_clip")
    assert colour_project.arrays.names(f"embeddings/{encoder_key('tiny-open_clip')}/") == parts, "nothing re-encoded"
    assert np.array_equal(local.embedding, on_ray.embedding)
