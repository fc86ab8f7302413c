"""Measurement CLI: ``python -m bench plan|qmax|ttotal|drift|validate|thaw``."""
