"""Request and response models of every protocol the server speaks (pydantic). The routes
validate with them and /openapi.json is built from their JSON schemas, so the document and the
behaviour cannot drift apart."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from .encode import ResponseFormat


class SpeechRequest(BaseModel):
    """POST /invocations and one bidirectional-stream message (the stream always sends PCM).
    Unknown fields are ignored here: SageMaker clients predate this schema."""

    model_config = ConfigDict(extra="ignore")
    text: str = Field(description="Text to speak (at most MAX_TEXT_CHARS characters).")
    voice: str | None = Field(None, description="A voice, an OpenAI alias or a blend like 'a(2)+b(1)'.")
    speed: float = Field(1.0, description="0.5 to 2.0.")
    response_format: ResponseFormat = "pcm"
    stream: bool = Field(True, description="false: one body with complete headers.")
    # Set by the captioned-speech route only; a private attribute is never read from a body.
    _timestamps: bool = PrivateAttr(False)


class VoiceRef(BaseModel):
    """OpenAI's custom-voice form, `{"id": "..."}`; the id is looked up like a voice name."""

    model_config = ConfigDict(extra="forbid")
    id: str


class OpenAISpeechRequest(BaseModel):
    """POST /v1/audio/speech with OpenAI's fields. `instructions` is accepted and ignored (Kokoro
    takes no style prompt); `stream` (ours, default true) false waits for the whole utterance.
    Unknown fields are a 400 naming the field (the official client sends only known ones)."""

    model_config = ConfigDict(extra="forbid")
    input: str = Field(description="Text to speak (at most MAX_TEXT_CHARS characters).")
    model: str | None = Field(None, description="MODEL_NAME or one of OPENAI_MODELS.")
    voice: str | VoiceRef | None = Field(None, description="OpenAI name, backend voice, blend, or {id}.")
    speed: float = Field(1.0, description="0.5 to 2.0.")
    response_format: ResponseFormat = "mp3"
    stream_format: Literal["audio", "sse"] = Field("audio", description="Only 'audio' is served.")
    instructions: str | None = Field(None, description="Accepted and ignored.")
    stream: bool = True

    def to_speech(self) -> SpeechRequest:
        voice = self.voice.id if isinstance(self.voice, VoiceRef) else self.voice
        return SpeechRequest(text=self.input, voice=voice, speed=self.speed,
                             response_format=self.response_format, stream=self.stream)


class CaptionedSpeechRequest(OpenAISpeechRequest):
    """POST /dev/captioned_speech (Kokoro-FastAPI's route): the speech request plus
    `return_timestamps`. The answer is JSON, not audio: see CaptionedSpeechResponse."""

    return_timestamps: bool = Field(True, description="false: the same JSON with no timestamps.")

    def to_speech(self) -> SpeechRequest:
        req = super().to_speech()
        req._timestamps = self.return_timestamps
        return req


class WordTimestamp(BaseModel):
    word: str
    start_time: float = Field(description="Seconds from the start of the audio.")
    end_time: float = Field(description="Seconds from the start of the audio.")


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
