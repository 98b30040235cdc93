"""A model that wraps another: everything but `stream` is the wrapped model's.

Interlock puts two layers around the user's model (the URL sanitiser and the journal);
each overrides only `stream`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any, TypeVar

from pydantic import BaseModel
from strands.models.model import Model
from strands.types.content import Messages

T = TypeVar("T", bound=BaseModel)


class WrappedModel(Model):
    """Delegates configuration, structured output and any other attribute to `inner`."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        # Anything else (a provider's own counters or settings) is the wrapped model's.
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def update_config(self, **model_config: Any) -> None:
        self.inner.update_config(**model_config)

    def get_config(self) -> Any:
        return self.inner.get_config()

    def structured_output(
        self,
        output_model: type[T],
        prompt: Messages,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncGenerator[dict[str, T | Any], None]:
        return self.inner.structured_output(output_model, prompt, system_prompt, **kwargs)
