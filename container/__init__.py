"""Kokoro-82M inference container: SageMaker contract, streaming, admission gate, drain."""
