"""Background jobs: long work in its own process, its progress in the project store."""
