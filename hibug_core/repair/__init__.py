"""Repair: select data for the worst slices, generate images for them, retrain, and compare slice by slice."""
