"""Language and multimodal models reached through the openai client (any OpenAI-compatible server)."""
