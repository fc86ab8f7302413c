"""Voice specs, blends and the alias tables (container/voices.py)."""

import pytest

from container.errors import BadRequest, UnknownVoice
from container.voices import DEFAULT_OPENAI_VOICES, parse_alias_table, parse_voice_spec, resolve_alias_table, resolve_voice

AVAILABLE = ("jf_alpha", "jm_kumo")


def test_voice_spec_canonical_form():
    assert parse_voice_spec("jf_alpha").canonical == "jf_alpha"
    assert parse_voice_spec("jf_alpha(3)+jm_kumo(1)").canonical == "jf_alpha(0.7500)+jm_kumo(0.2500)"
    assert parse_voice_spec(" jf_alpha + jm_kumo ").canonical == "jf_alpha(0.5000)+jm_kumo(0.5000)"
    assert parse_voice_spec("a(1)+b(1)+a(2)").parts == (("a", 0.75), ("b", 0.25))
    for bad in ("", "a+", "a(0)", "a(-1)", "a(x)", "(1)", "a b", "+".join("v" * 9)):
        with pytest.raises(BadRequest):
            parse_voice_spec(bad)


def test_resolve_voice():
    aliases = resolve_alias_table(DEFAULT_OPENAI_VOICES, AVAILABLE, "jf_alpha", blends=True)
    assert aliases["alloy"] == "jf_alpha" and aliases["onyx"] == "jm_kumo"
    kw = dict(available=AVAILABLE, aliases=aliases, fallback="jf_alpha", blends=True)
    assert resolve_voice(None, **kw) == "jf_alpha"
    assert resolve_voice("ALLOY", **kw) == "jf_alpha"
    assert resolve_voice("jm_kumo(1)+jf_alpha(1)", **kw) == "jm_kumo(0.5000)+jf_alpha(0.5000)"
    with pytest.raises(UnknownVoice) as e:
        resolve_voice("jf_alpha+nobody", **kw)
    assert "'nobody'" in e.value.detail and e.value.param == "voice"
    with pytest.raises(BadRequest, match="does not blend"):
        resolve_voice("jf_alpha+jm_kumo", **{**kw, "blends": False})


def test_alias_table_config_and_fallback():
    table = parse_alias_table("alloy=af_alloy|jm_kumo, narrator=jf_alpha(2)+jm_kumo(1)")
    assert table == {"alloy": ("af_alloy", "jm_kumo"), "narrator": ("jf_alpha(2)+jm_kumo(1)",)}
    assert parse_alias_table('{"Echo": ["x", "jf_alpha"]}') == {"echo": ("x", "jf_alpha")}
    resolved = resolve_alias_table({**DEFAULT_OPENAI_VOICES, **table}, AVAILABLE, "jf_alpha", blends=True)
    assert resolved["alloy"] == "jm_kumo"  # first candidate this backend has
    assert resolved["narrator"] == "jf_alpha(0.6667)+jm_kumo(0.3333)"
    # a backend that cannot blend, or has none of the candidates, speaks the default voice
    assert resolve_alias_table(table, AVAILABLE, "jf_alpha", blends=False)["narrator"] == "jf_alpha"
    with pytest.raises(ValueError):
        parse_alias_table("alloy")
