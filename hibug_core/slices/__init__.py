"""Slices of the data by tag combinations: exhaustive enumeration, honest statistics, diagnosis of error slices."""
