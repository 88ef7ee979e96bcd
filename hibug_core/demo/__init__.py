"""The bundled demo: easy-vqa shape images with known attributes and a CNN with planted bugs."""
from hibug_core.demo.build import DemoConfig, build_demo, ensure_demo

__all__ = ["DemoConfig", "build_demo", "ensure_demo"]
