"""Kokoro-FastAPI's inline tags, as patterns: standard library only, because the weight exporter
(backends/g2p.py, shipped in the weight-cache build's source archive) reads IPA_TAG and must not
pull in the text-normalization libraries (emoji, roman, regex) that readings.py uses."""
from __future__ import annotations

import re

IPA_TAG = re.compile(r"\[([^\[\]\n]{1,80})\]\(/([^/\n]{1,120})/\)")
"""Kokoro-FastAPI's inline pronunciation, [word](/ipa/): G2P speaks the IPA instead of the word
(backends/g2p.py), and normalize() keeps the tag away from every text rule."""

PAUSE_TAG = re.compile(r"\[pause:(\d{1,3}(?:\.\d{1,3})?)s\]", re.I)
"""Kokoro-FastAPI's inline pause, [pause:1.5s]: that much silence (engine.segments_of)."""

CONTROL_TAG = re.compile(r"\[voice:\s*(?P<voice>[A-Za-z0-9_][A-Za-z0-9_+\-(). ]*?)\s*\]"
                         r"|\[rate:\s*(?P<rate>\d{1,2}(?:\.\d{1,3})?)\s*\]"
                         r"|\[pause:(?P<pause>\d{1,3}(?:\.\d{1,3})?)s\]", re.I)
"""Kokoro-FastAPI's control tags under allow_voice_tags: [voice:name] switches speaker, [rate:x]
multiplies the speed, from there on; [pause:Ns] as always."""
