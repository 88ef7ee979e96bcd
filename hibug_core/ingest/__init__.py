"""Turning manifests and image folders into validated project data, with a clear message for every bad cell."""
from hibug_core.ingest.manifest import ValidatedManifest, load_manifest, validate_manifest

__all__ = ["ValidatedManifest", "load_manifest", "validate_manifest"]
