"""Turning manifests and image folders into validated project data, with a clear message for every bad cell (which
task reads a manifest is decided in hibug_core.tasks.importing)."""
from hibug_core.ingest.manifest import ValidatedManifest, validate_manifest

__all__ = ["ValidatedManifest", "validate_manifest"]
