"""Request and response models of every protocol the server speaks (pydantic). The routes
validate with them and /openapi.json is built from their JSON schemas, so the document and the
behaviour cannot drift apart."""
from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, PrivateAttr

from .encode import ResponseFormat


class NormalizationOptions(BaseModel):
    """Kokoro-FastAPI's `normalization_options` (same names, same defaults): what the text
    normalizer (container/normalize.py) expands before G2P. English G2P only."""

    model_config = ConfigDict(extra="forbid")
    normalize: bool = Field(True, description="Master switch: false speaks the text as written "
                            "(numbers, money, dates, times, abbreviations included).")
    unit_normalization: bool = Field(False, description="10KB -> ten kilobytes, 5 km -> five kilometers.")
    url_normalization: bool = Field(True, description="https://example.com/docs -> example dot com slash docs.")
    email_normalization: bool = Field(True, description="a.b@example.com -> a dot b at example dot com.")
    optional_pluralization_normalization: bool = Field(True, description="word(s) -> words.")
    phone_normalization: bool = Field(True, description="(555) 123-4567 -> five five five, one two three, ...")
    replace_remaining_symbols: bool = Field(True, description="& -> and, @ -> at, + -> plus, ... "
                                            "for the symbols left after the rules above.")


_VOICE_DOC = ("A voice, an OpenAI alias, or a blend: 'a(2)+b(1)' (weights optional, normalised), "
              "'a-b' subtracts b's style from a's.")
_SPEED_DOC = "0.25 to 4.0 (SPEED_MIN, SPEED_MAX)."
_VOLUME_DOC = "Gain on the audio, 0 to 100 (null: 1); clipped to full scale."
_NORM_DOC = "Text normalization switches (null or absent: the defaults shown in NormalizationOptions)."
_LANG_DOC = ("Kokoro's language letter (a en-us, b en-gb, e es, f fr-fr, h hi, i it, p pt-br) or an "
             "espeak name like 'en-gb': the G2P language. Absent: G2P_LANGUAGE. j and z are not "
             "in this image (spoken with G2P_LANGUAGE, with a Warning header).")


class SpeechRequest(BaseModel):
    """POST /invocations and one bidirectional-stream message (the stream always sends PCM).
    Unknown fields are ignored here: SageMaker clients predate this schema."""

    model_config = ConfigDict(extra="ignore")
    text: str = Field(description="Text to speak (at most MAX_TEXT_CHARS characters).")
    voice: str | None = Field(None, description=_VOICE_DOC)
    speed: float = Field(1.0, description=_SPEED_DOC)
    response_format: ResponseFormat = "pcm"
    stream: bool = Field(True, description="false: one body with complete headers.")
    lang_code: str | None = Field(None, description=_LANG_DOC)
    volume_multiplier: float | None = Field(1.0, ge=0, le=100, description=_VOLUME_DOC)
    normalization_options: NormalizationOptions | None = Field(None, description=_NORM_DOC)
    # Set by the routes only; private attributes are never read from a body.
    _timestamps: bool = PrivateAttr(False)
    _lang: str | None = PrivateAttr(None)  # the espeak language lang_code resolved to
    _warnings: list = PrivateAttr(default_factory=list)  # what the Warning header says
    _download_format: str | None = PrivateAttr(None)  # return_download_link: the file's format
    _timing: bool = PrivateAttr(False)  # timing_headers: timing headers on a whole (stream=false) body
    _timing_sidecar: bool = PrivateAttr(False)  # return_timing (Kokoro-FastAPI's): a JSON beside the download
    _tags: bool = PrivateAttr(False)  # [voice:]/[rate:] tags apply (allow_voice_tags, ssml)
    _voice_map: dict = PrivateAttr(default_factory=dict)  # tag name (lower case) -> (voice id, rate)
    _voice_aliases: dict = PrivateAttr(default_factory=dict)  # voice_aliases, keys lower case
    _ssml: bool = PrivateAttr(False)
    _sse: bool = PrivateAttr(False)  # stream_format=sse
    _voice_rate: float = PrivateAttr(1.0)  # the request voice's alias rate


class VoiceRef(BaseModel):
    """OpenAI's custom-voice form, `{"id": "..."}`; the id is looked up like a voice name."""

    model_config = ConfigDict(extra="forbid")
    id: str


class VoiceAliasTarget(BaseModel):
    """Kokoro-FastAPI's voice_aliases value in object form: a voice and its natural pace."""

    model_config = ConfigDict(extra="forbid")
    voice: str
    rate: float | None = Field(None, ge=0.25, le=4.0, description="Multiplies the request's speed "
                               "whenever this alias speaks.")


_TAGS_DOC = ("Kokoro-FastAPI's: [voice:name] in the input switches speaker (and [rate:x] multiplies "
             "the speed) from there on. Off: bracketed text is spoken as written ([pause:Ns] and "
             "[word](/ipa/) always apply).")
_SSML_DOC = ("The input is SSML (<speak>...</speak>): break, prosody rate, voice, phoneme (IPA), sub "
             "and simple say-as (characters, digits, cardinal, ordinal, telephone) are applied; other "
             "elements keep their text. Off: tags in the input are dropped, their text spoken.")
_ALIASES_DOC = ("Kokoro-FastAPI's: short names for voices, e.g. {'narrator': 'jf_alpha(2)+jm_kumo'} or "
                "{'narrator': {'voice': 'jf_alpha', 'rate': 0.8}}; usable as voice and in [voice:] "
                "tags, matched case-insensitively.")


class OpenAISpeechRequest(BaseModel):
    """POST /v1/audio/speech with OpenAI's fields. `instructions` is accepted and ignored (Kokoro
    takes no style prompt); `stream` (ours, default true) false waits for the whole utterance.
    Unknown fields are a 400 naming the field (the official client sends only known ones)."""

    model_config = ConfigDict(extra="forbid")
    input: str = Field(description="Text to speak (at most MAX_TEXT_CHARS characters).")
    model: str | None = Field(None, description="MODEL_NAME or one of OPENAI_MODELS, also with a "
                              "date suffix (gpt-4o-mini-tts-2025-12-15).")
    voice: str | VoiceRef | None = Field(None, description=_VOICE_DOC + " Or {\"id\": ...}.")
    speed: float = Field(1.0, description=_SPEED_DOC)
    response_format: ResponseFormat = "mp3"
    stream_format: Literal["audio", "sse"] = Field("audio", description="'audio': the encoded audio "
                                                   "itself; 'sse': OpenAI's server-sent events, "
                                                   "speech.audio.delta (base64 audio) then speech.audio.done.")
    instructions: str | None = Field(None, description="Accepted and ignored (Warning header): "
                                     "Kokoro takes no style prompt.")
    stream: bool = True
    # Kokoro-FastAPI's fields, with its meanings.
    lang_code: str | None = Field(None, description=_LANG_DOC)
    volume_multiplier: float | None = Field(1.0, ge=0, le=100, description=_VOLUME_DOC)
    normalization_options: NormalizationOptions | None = Field(None, description=_NORM_DOC)
    return_download_link: bool = Field(False, description="Also keep the audio as a file: its path is "
                                       "in X-Download-Path (GET /v1/download/{file}) once the response ends.")
    download_format: ResponseFormat | None = Field(None, description="The kept file's format "
                                                   "(default: response_format).")
    return_timing: bool = Field(False, description="Kokoro-FastAPI's: with return_download_link, a JSON "
                                "of each segment's text, start and end (s) is kept beside the file; "
                                "its path is in X-Timing-Path.")
    timing_headers: bool = Field(False, description="Ours: X-TTFAB-Ms, X-Audio-Seconds and X-Total-Ms "
                                 "headers (stream=false; a streamed response's headers leave first).")
    allow_voice_tags: bool = Field(False, description=_TAGS_DOC)
    ssml: bool = Field(False, description=_SSML_DOC)
    voice_aliases: dict[str, str | VoiceAliasTarget] | None = Field(None, description=_ALIASES_DOC)

    def to_speech(self) -> SpeechRequest:
        voice = self.voice.id if isinstance(self.voice, VoiceRef) else self.voice
        req = SpeechRequest(text=self.input, voice=voice, speed=self.speed,
                            response_format=self.response_format, stream=self.stream,
                            lang_code=self.lang_code, volume_multiplier=self.volume_multiplier,
                            normalization_options=self.normalization_options)
        if self.instructions:
            req._warnings.append("instructions ignored: Kokoro takes no style prompt")
        if self.return_download_link:
            req._download_format = self.download_format or self.response_format
        elif self.download_format is not None:
            req._warnings.append("download_format ignored: it applies with return_download_link=true")
        if self.timing_headers:
            req._timing = True
            if self.stream:
                req._warnings.append("timing_headers: no timing headers on a streamed response (they leave "
                                     "before the audio is made); use stream=false or /dev/captioned_speech")
        if self.return_timing:
            if self.return_download_link:
                req._timing_sidecar = True
            else:
                req._warnings.append("return_timing ignored: the timing file is kept beside the download, "
                                     "so it needs return_download_link=true (timing_headers=true gives headers)")
        req._tags = self.allow_voice_tags or self.ssml
        req._ssml = self.ssml
        req._sse = self.stream_format == "sse"
        req._voice_aliases = {k.strip().lower(): (v, None) if isinstance(v, str) else (v.voice, v.rate)
                              for k, v in (self.voice_aliases or {}).items()}
        return req


class CaptionedSpeechRequest(OpenAISpeechRequest):
    """POST /dev/captioned_speech (Kokoro-FastAPI's route): the speech request plus
    `return_timestamps`. The answer is JSON, not audio: see CaptionedSpeechResponse."""

    return_timestamps: bool = Field(True, description="false: the same JSON with no timestamps.")

    def to_speech(self) -> SpeechRequest:
        req = super().to_speech()
        req._timestamps = self.return_timestamps
        if req._sse:
            req._sse = False
            req._warnings.append("stream_format 'sse' ignored: /dev/captioned_speech answers JSON lines")
        return req


class DialogueTurn(BaseModel):
    """One speaker's turn (Kokoro-FastAPI's): `voice` (or `voice_id`) and `text`."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    voice: str = Field(validation_alias=AliasChoices("voice", "voice_id"), description=_VOICE_DOC)
    text: str = Field(min_length=1)


class DialogueRequest(BaseModel):
    """POST /dev/dialogue (Kokoro-FastAPI's): turns spoken in order, each in its voice, as one
    audio stream; `pause_between_turns` seconds of silence between them."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    model: str | None = Field(None, description="MODEL_NAME or one of OPENAI_MODELS.")
    turns: list[DialogueTurn] = Field(min_length=1, validation_alias=AliasChoices("turns", "inputs"))
    pause_between_turns: float = Field(0.0, ge=0, le=10)
    response_format: ResponseFormat = "mp3"
    download_format: ResponseFormat | None = None
    speed: float = Field(1.0, description=_SPEED_DOC)
    stream: bool = True
    return_download_link: bool = False
    lang_code: str | None = Field(None, description=_LANG_DOC)
    volume_multiplier: float | None = Field(1.0, ge=0, le=100, description=_VOLUME_DOC)
    normalization_options: NormalizationOptions | None = Field(None, description=_NORM_DOC)
    return_timing: bool = False
    voice_aliases: dict[str, str | VoiceAliasTarget] | None = Field(None, description=_ALIASES_DOC)

    def to_openai(self) -> OpenAISpeechRequest:
        """The turns as one tagged input: [voice:a] text [pause:Ns] [voice:b] text ..."""
        pause = f" [pause:{self.pause_between_turns:g}s] " if self.pause_between_turns > 0 else " "
        text = pause.join(f"[voice:{t.voice.strip()}] {t.text.strip()}" for t in self.turns)
        return OpenAISpeechRequest(
            input=text, model=self.model, voice=self.turns[0].voice.strip(), speed=self.speed,
            response_format=self.response_format, stream=self.stream, lang_code=self.lang_code,
            volume_multiplier=self.volume_multiplier, normalization_options=self.normalization_options,
            return_download_link=self.return_download_link, download_format=self.download_format,
            return_timing=self.return_timing, allow_voice_tags=True, voice_aliases=self.voice_aliases)


class SsmlRequest(BaseModel):
    """POST /dev/ssml (Kokoro-FastAPI's): SSML -> the inline tags the speech routes read."""

    model_config = ConfigDict(extra="forbid")
    text: str = Field(description="An SSML document (<speak>...</speak>); other text passes through.")
    voice: str = Field("", description="The voice the speech request will use: [voice:] reverts to it.")


class PhonemizeRequest(BaseModel):
    """POST /dev/phonemize (Kokoro-FastAPI's route): what G2P makes of a text, after the same
    normalization the speech routes apply."""

    model_config = ConfigDict(extra="forbid")
    text: str = Field(description="Text to phonemize (at most MAX_TEXT_CHARS characters).")
    language: str = Field("a", description=_LANG_DOC)
    normalization_options: NormalizationOptions | None = Field(None, description=_NORM_DOC)


class PhonemizeResponse(BaseModel):
    phonemes: str = Field(description="Kokoro phonemes of the normalized text, segments joined by spaces.")
    tokens: list[int] = Field(description="The model's input ids for those phonemes (pads excluded).")
    normalized_text: str = Field(description="The text G2P was given (ours; Kokoro-FastAPI has no such field).")


class GenerateFromPhonemesRequest(BaseModel):
    """POST /dev/generate_from_phonemes (Kokoro-FastAPI's route): speak phonemes as given, no G2P."""

    model_config = ConfigDict(extra="forbid")
    phonemes: str = Field(description="Kokoro phonemes (characters outside the vocabulary are dropped).")
    voice: str | None = Field(None, description=_VOICE_DOC)
    speed: float = Field(1.0, description=_SPEED_DOC)
    response_format: ResponseFormat = Field("wav", description="Kokoro-FastAPI answers WAV; ours may pick.")
    volume_multiplier: float | None = Field(1.0, ge=0, le=100, description=_VOLUME_DOC)


class VoiceCombineRequest(BaseModel):
    """POST /v1/audio/voices/combine. Kokoro-FastAPI's body is the bare JSON string ("a+b") or
    list (["a", "b"]); both are accepted, and this object form too."""

    model_config = ConfigDict(extra="forbid")
    voices: str | list[str] = Field(description="'a+b', 'a(2)+b(1)', 'a-b', or a list of voices to mix equally.")


class WordTimestamp(BaseModel):
    word: str
    start_time: float = Field(description="Seconds from the start of the audio.")
    end_time: float = Field(description="Seconds from the start of the audio.")
    voice: str | None = Field(None, description="The voice that spoke the word; only with allow_voice_tags "
                              "or ssml (absent otherwise), as Kokoro-FastAPI.")


class CaptionedSpeechResponse(BaseModel):
    """One JSON object (stream=false), or one per line, one line per segment (stream=true,
    application/x-ndjson): each line's audio continues the previous line's byte stream."""

    audio: str = Field(description="Base64 of the encoded audio (response_format).")
    audio_format: str = Field(description="Media type of the decoded audio.")
    timestamps: list[WordTimestamp] = Field(default_factory=list)


class VoiceInfo(BaseModel):
    id: str
    name: str
    language: str | None = Field(None, description="From Kokoro's naming (first letter), where known.")
    gender: Literal["female", "male"] | None = Field(None, description="From Kokoro's naming (second letter).")


class VoiceList(BaseModel):
    """GET /v1/audio/voices. `voices` are objects (`?legacy=true`: bare names, the shape of
    Kokoro-FastAPI before 0.3)."""

    voices: list[VoiceInfo] | list[str]
    default: str | None
    aliases: dict[str, str] = Field(description="OpenAI voice name -> the voice it speaks here.")
    blends: bool


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class OpenAIErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None
    code: str


class OpenAIError(BaseModel):
    """Errors on /v1 and /dev: OpenAI's shape, so its clients raise their usual exception."""

    error: OpenAIErrorDetail


class ContainerErrorBody(BaseModel):
    """Errors on /invocations: a stable code and a sentence (some codes add fields)."""

    model_config = ConfigDict(extra="allow")
    error: str
    detail: str | None = None


class PingBody(BaseModel):
    model_config = ConfigDict(extra="allow")
    status: Literal["ok", "loading", "error", "draining"]
    detail: str | None = None
    backend: str | None = None
    cores: dict | None = Field(None, description="Usable CPU cores and where the count came from.")
