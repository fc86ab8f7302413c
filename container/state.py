"""What every route reads from `request.app.state.container`: settings, backend, engine, metrics."""
from __future__ import annotations

from . import voices as voices_mod
from .backends.base import Backend
from .downloads import DownloadStore
from .engine import Engine
from .footprint import FootprintCache
from .metrics import MetricsRecorder
from .settings import Settings


class State:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.backend: Backend | None = None
        self.engine: Engine | None = None
        self.metrics = MetricsRecorder(
            settings.model_name, capacity_rps=settings.pressure_capacity_rps,
            queue_max_depth=settings.queue_max_depth, weights=settings.pressure_weights,
            window_s=settings.pressure_window_s, endpoint_name=settings.endpoint_name,
            variant_name=settings.variant_name)
        self._aliases: dict[str, str] | None = None
        # Set once the backend knows its device (after framework init): the copy's memory for /ping.
        self.footprint: FootprintCache | None = None
        # return_download_link's files; the directory is made on first use.
        self.downloads = DownloadStore(settings.download_dir, settings.download_max_files,
                                       settings.download_max_bytes, settings.download_ttl_s)

    @property
    def voices(self) -> tuple[str, ...]:
        return self.backend.voices if self.backend is not None else ()

    @property
    def default_voice(self) -> str | None:
        return voices_mod.default_voice(self.voices, self.settings.default_voice)

    @property
    def blends(self) -> bool:
        return bool(self.backend is not None and self.backend.supports_blends)

    def aliases(self) -> dict[str, str]:
        """OpenAI voice name -> canonical voice on this backend (fixed once the model is loaded)."""
        ready = self.engine is not None and self.engine.ready
        if self._aliases is not None and ready:
            return self._aliases
        table = voices_mod.resolve_alias_table(
            voices_mod.effective_aliases(self.settings.openai_voices), self.voices,
            self.default_voice, self.blends)
        if ready:
            self._aliases = table
        return table

    def preferred_voices(self) -> dict[str, str]:
        """OpenAI voice name -> the voice it speaks with the full upstream set (its first candidate)."""
        return voices_mod.preferred_voices(voices_mod.effective_aliases(self.settings.openai_voices))

    def model_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((self.settings.model_name, *self.settings.openai_models)))
