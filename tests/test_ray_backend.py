"""The Ray Data backend on a local Ray instance gives what local runs give, into the same caches: embeddings, and the
user's own model (predict)."""
from __future__ import annotations

import numpy as np
import pytest

ray = pytest.importorskip("ray")

import torch  # noqa: E402

from hibug_core.embeddings.compute import embed_project  # noqa: E402
from hibug_core.embeddings.ray_backend import RayOptions, embed_with_ray  # noqa: E402
from hibug_core.embeddings.registry import encoder_key, load_encoder  # noqa: E402
from hibug_core.image_loader import open_image  # noqa: E402


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    yield
    ray.shutdown()


@pytest.mark.slow
def test_ray_embeddings_match_local_ones_and_fill_the_cache(colour_project, local_ray):
    on_ray = embed_with_ray(colour_project, "tiny-open_clip", options=RayOptions(batch_size=4, actors=2))
    parts = colour_project.arrays.names(f"embeddings/{encoder_key('tiny-open_clip')}/")
    assert on_ray.embedding.shape == (12, 64) and parts
    encoder = load_encoder("tiny-open_clip")
    paths = colour_project.samples()["image_path"]
    direct = encoder.encode_images(torch.stack([encoder.transform(open_image(p)) for p in paths]))["embedding"]
    assert np.allclose(on_ray.embedding, direct, atol=2e-3)  # stored as float16
    local = embed_project(colour_project, "tiny-open_clip")
    assert colour_project.arrays.names(f"embeddings/{encoder_key('tiny-open_clip')}/") == parts, "nothing re-encoded"
    assert np.array_equal(local.embedding, on_ray.embedding)


@pytest.mark.slow
def test_predict_on_ray_records_what_the_local_run_recorded(demo_project, tmp_path, local_ray):
    import shutil

    from hibug_core.models.predict import model_outputs, predict_project
    from hibug_core.models.registry import load_model
    from hibug_core.store.project import Project

    folder = shutil.copytree(demo_project, tmp_path / "demo")
    spec = "shape-cnn:models/shape-cnn.pt"  # relative to the project folder, as the demo records it
    with Project.open(folder) as project:
        adapter = load_model(spec, root=folder)
        shutil.rmtree(folder / "arrays" / "models" / adapter.key)  # nothing cached: every image runs on Ray
        ids = project.samples().index[:96]
        done = predict_project(project, adapter, name="on ray", sample_ids=ids,
                               ray=RayOptions(actors=2, batch_size=16, save_every=32))
        assert (done.samples, done.computed) == (96, len(project.samples(sample_ids=ids)["content_hash"].unique()))
        assert (folder / "arrays" / "models" / adapter.key).exists()
        ours, theirs = project.samples("on ray").loc[ids], project.samples("shape-cnn").loc[ids]
        assert ours["prediction"].tolist() == theirs["prediction"].tolist()
        assert np.allclose(ours["confidence"], theirs["confidence"], atol=1e-5)
        features = model_outputs(project, "on ray", sample_ids=ids)
        assert features.shape == (96, 32)
