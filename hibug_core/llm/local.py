"""In-process vision-language models (transformers image-text-to-text: SmolVLM, Qwen-VL, LLaVA, ...) behind the same
chat-completions call the OpenAI client makes, so tagging, tag proposal and captioning use them through the one LLM
path (`llm.client.ask`) with the same validation. Requests from many threads are batched; the model is loaded once
per process and runs on the GPU (fp16) when there is one."""
from __future__ import annotations

import base64
import logging
import queue
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

from hibug_core.cache import process_cache
from hibug_core.embeddings.base import pick_device

logger = logging.getLogger(__name__)

PREFIX = "transformers:"  # an LLM model named "transformers:<folder or hub id>" runs in this process
MAX_NEW_TOKENS = 512
BATCH_WAIT_S = 0.02  # how long the first request of a batch waits for others to join it


def is_local(model: str) -> bool:
    return model.strip().startswith(PREFIX)


def _image(url: str):
    """A PIL image from a data URL (how hibug sends images) or a local file path."""
    from hibug_core.image_loader import open_image

    return open_image(base64.b64decode(url.partition(",")[2]) if url.startswith("data:") else url)


def conversation(messages: list[dict]) -> tuple[list[dict], list]:
    """OpenAI chat messages as a transformers chat (content parts, images as placeholders) and the images in order."""
    chat, images = [], []
    for message in messages:
        content = message.get("content") or ""
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else []
        for part in content if isinstance(content, list) else []:
            if part.get("type") == "text":
                parts.append({"type": "text", "text": part["text"]})
            elif part.get("type") == "image_url":
                images.append(_image(part["image_url"]["url"]))
                parts.append({"type": "image"})
        chat.append({"role": message["role"], "content": parts})
    return chat, images


@dataclass
class _Request:
    chat: list[dict]
    images: list
    max_new_tokens: int
    done: threading.Event = field(default_factory=threading.Event)
    reply: str | None = None
    error: BaseException | None = None


class VisionLanguageModel:
    """A loaded image-text-to-text model; `answer` may be called from many threads at once: waiting requests are
    generated together in one padded batch (greedy decoding, so answers do not depend on the batch)."""

    def __init__(self, spec: str, model, processor, device: str, batch_size: int = 8):
        self.spec, self.model, self.processor, self.device, self.batch_size = spec, model, processor, device, batch_size
        tokenizer = getattr(processor, "tokenizer", None)
        if tokenizer is not None:
            tokenizer.padding_side = "left"  # decoder-only generation continues from the right end
        self._queue: queue.Queue[_Request] = queue.Queue()
        self._lock = threading.Lock()
        self._worker: threading.Thread | None = None

    def answer(self, messages: list[dict], max_new_tokens: int = MAX_NEW_TOKENS) -> str:
        chat, images = conversation(messages)
        request = _Request(chat, images, max_new_tokens)
        self._queue.put(request)
        with self._lock:
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._serve, name="hibug-vlm", daemon=True)
                self._worker.start()
        request.done.wait()
        if request.error is not None:
            raise request.error
        return request.reply or ""

    def _serve(self) -> None:
        while True:
            try:
                first = self._queue.get(timeout=5.0)
            except queue.Empty:
                return  # idle: the next request starts a new worker
            batch = [first]
            while len(batch) < self.batch_size:
                try:
                    batch.append(self._queue.get(timeout=BATCH_WAIT_S))
                except queue.Empty:
                    break
            try:
                for request, reply in zip(batch, self._generate(batch)):
                    request.reply = reply
            except Exception as error:  # noqa: BLE001 (every request of the batch learns why, then the worker goes on)
                from hibug_core.llm.errors import LLMUnavailable

                failure = LLMUnavailable(f"{self.spec} failed to answer in process ({type(error).__name__}: "
                                         f"{str(error).splitlines()[0][:200] if str(error) else ''})")
                for request in batch:
                    request.error = failure
            finally:
                for request in batch:
                    request.done.set()

    def _generate(self, batch: list[_Request]) -> list[str]:
        import torch

        texts = [self.processor.apply_chat_template(r.chat, add_generation_prompt=True, tokenize=False) for r in batch]
        images = [r.images for r in batch]
        options = {"images": images} if any(images) else {}
        inputs = self.processor(text=texts, return_tensors="pt", padding=True, **options).to(self.device)
        if "pixel_values" in inputs and self.device.startswith("cuda"):
            inputs["pixel_values"] = inputs["pixel_values"].to(self.model.dtype)
        with torch.inference_mode():
            output = self.model.generate(**inputs, max_new_tokens=max(r.max_new_tokens for r in batch),
                                         do_sample=False)
        new_tokens = output[:, inputs["input_ids"].shape[1]:]
        return [text.strip() for text in self.processor.batch_decode(new_tokens, skip_special_tokens=True)]


def load_vlm(model: str, device: str | None = None) -> VisionLanguageModel:
    """The model named "transformers:<folder or hub id>", loaded once per process; offline and not in the cache, it
    fails at once saying how to provide it."""
    return _loaded_vlm(model.strip()[len(PREFIX):].strip(), pick_device(device))


@process_cache("vision-language models", max_items=1)
def _loaded_vlm(source: str, device: str) -> VisionLanguageModel:
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from hibug_core.embeddings.hub import offline_unless_reachable
    from hibug_core.llm.errors import LLMUnavailable

    spec = PREFIX + source
    folder = Path(source).expanduser()
    where = str(folder) if folder.exists() else source
    dtype = torch.float16 if device.startswith("cuda") else torch.float32
    try:
        with offline_unless_reachable():
            processor = AutoProcessor.from_pretrained(where)
            model = AutoModelForImageTextToText.from_pretrained(where, dtype=dtype)
    except (OSError, ValueError, KeyError) as error:
        raise LLMUnavailable(f"{spec}: cannot load it ({str(error).splitlines()[0][:200]}); offline, give a folder "
                             "saved with save_pretrained, or a hub id already in the Hugging Face cache "
                             "(huggingface-cli download <id> on a machine with internet)") from None
    logger.info("loaded %s on %s", spec, device)
    return VisionLanguageModel(spec, model.eval().to(device), processor, device)


class LocalClient:
    """Quacks like openai.OpenAI for `client.chat.completions.create(model=..., messages=...)`."""

    def __init__(self, vlm: VisionLanguageModel):
        self.vlm = vlm
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self._create))

    def _create(self, *, model: str, messages: list[dict], max_tokens: int | None = None, **_ignored):
        # response_format (structured outputs) is not enforced in process: every answer is validated by the caller.
        reply = self.vlm.answer(messages, max_tokens or MAX_NEW_TOKENS)
        return SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content=reply, refusal=None))])
