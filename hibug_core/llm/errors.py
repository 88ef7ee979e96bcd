"""What the LLM call path raises, apart from both its clients so that each can import them."""
from __future__ import annotations

from hibug_core.errors import HibugError, ModelLoadError


class LLMUnavailable(ModelLoadError):
    """The server could not be reached, refused the key, or does not serve the model: asking again will not help."""


class LLMAnswerError(HibugError, ValueError):
    """No usable answer after every attempt; `problem` says what was wrong with the last one."""

    def __init__(self, config, problem: str):  # config: hibug_core.llm.client.LLMConfig
        if len(problem) > 300:  # a runaway reply is not echoed whole into logs, runs and pages
            problem = f"{problem[:300]}... ({len(problem):,} characters)"
        self.problem = problem
        super().__init__(f"no valid answer from {config.describe()} after {config.attempts} attempts; last problem: "
                         f"{problem}")
