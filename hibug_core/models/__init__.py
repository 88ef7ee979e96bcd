"""The model under test: adapters for the user's own network (timm, torchvision, transformers, python), prediction
over a project's images, and fine-tuning for repair."""
