"""Assigning a tag of every attribute to every image: zero-shot, measured, taught by example, multimodal LLM."""
