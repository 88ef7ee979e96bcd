"""Image and text encoders behind one registry, and image embeddings cached per (encoder, image content)."""
