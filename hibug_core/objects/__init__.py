"""Object-level debugging: detectors and pose models, one sample per object (COCO import, matching, geometry)."""
