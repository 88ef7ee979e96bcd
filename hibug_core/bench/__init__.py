"""The planted-bug benchmark: problems with known bugs in the shape world, hibug run on each, and scores."""
