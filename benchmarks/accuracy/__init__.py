"""Accuracy: extraction against other extractors, invariance of fingerprints, the real-web development set."""
