"""The model zoo: networks hibug itself defines and trains (the demos are built with them), each loaded through the
model registry like any user's network (hibug_core.models.registry)."""
