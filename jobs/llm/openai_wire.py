"""The openai back end's wire: the SDK client it makes, and what it says when the other end is not a
Chat Completions server that answers (:mod:`jobs.llm.openai_chat` builds the requests and reads the answers).

- A model name is required: EPISODES_MODEL's default names a Claude model, which no local server
  serves and which would be priced as Claude.
- Redirects stay on the server's origin: a 3xx to another scheme, host or port is refused before the
  transcript is sent there (an httpx event hook), with a one-line reason.
- A server that cannot be connected to (refused, no such host) gives the claim back with no attempt
  counted (:class:`ServerUnreachable` is a :class:`~jobs.errors.ConfigError`, which the summarize job
  releases), so a stopped Ollama does not dead-letter the queue.
- A 200 whose body is no chat completion (a proxy's HTML page) is a failed call with its reason and a
  short excerpt of the body, never an AttributeError.
- No setting's secret is shown: the server's address is masked by :func:`jobs.logs.hide_secrets`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from jobs.config import Settings, default_model
from jobs.errors import ConfigError, ModelUnreachable
from jobs.llm.repair import short, validation_summary
from jobs.logs import hide_secrets

if TYPE_CHECKING:  # imported when a client is made: most commands never call a model
    import httpx2
    import openai

PLACEHOLDER_KEY = "not-needed"  # a local server takes any key; the SDK insists on one
EXCERPT_CHARS = 160
REDIRECTS = frozenset({301, 302, 303, 307, 308})


class ServerUnreachable(ModelUnreachable):
    """The model server cannot be connected to. Start it, or check OPENAI_BASE_URL; the session was
    given back with no attempt counted."""


def require_model(settings: Settings) -> None:
    """Refuse to start without a model name the user chose (the default is a Claude model)."""
    if settings.model == default_model():
        where = address(settings) or "OPENAI_BASE_URL"
        raise ConfigError(
            f"The openai back end needs a model name: set EPISODES_MODEL to a model that {where} serves "
            f"(`ollama list`, or GET /v1/models); {default_model()} is the anthropic back end's default, not "
            "one a local server has. See docs/openai-compatible.md."
        )


def address(settings: Settings) -> str:
    """OPENAI_BASE_URL as it may be shown: its userinfo password and secret query values masked."""
    return hide_secrets(settings.openai_base_url or "")


def make_openai_client(settings: Settings) -> openai.OpenAI:
    """The SDK's client for OPENAI_BASE_URL with OPENAI_API_KEY (a placeholder when unset: local servers
    need none), the shared retries and timeout, and redirects kept on the server's origin."""
    if not settings.openai_base_url and not settings.openai_api_key:
        raise ConfigError(
            "The openai back end needs OPENAI_BASE_URL (a local server such as Ollama: "
            "http://localhost:11434/v1) or OPENAI_API_KEY (OpenAI's API); see docs/openai-compatible.md."
        )
    import openai

    return openai.OpenAI(
        api_key=settings.openai_api_key or PLACEHOLDER_KEY,
        base_url=settings.openai_base_url,
        max_retries=settings.max_retries,
        timeout=settings.model_timeout_s,
        http_client=openai.DefaultHttpxClient(event_hooks={"response": [_same_origin_only]}),
    )


def _origin(url: Any) -> tuple[str, str, int | None]:
    return (str(url.scheme), str(url.host).lower(), url.port)


def _same_origin_only(response: httpx2.Response) -> None:
    """An httpx response hook: a redirect to another origin is refused before it is followed (the
    request would carry the transcript, and the key, to another server)."""
    location = response.headers.get("location")
    if response.status_code not in REDIRECTS or not location:
        return
    target = response.request.url.join(location)
    if _origin(target) != _origin(response.request.url):
        import openai

        raise openai.APIStatusError(
            f"redirected to another origin ({hide_secrets(str(target))}); not followed",
            response=response,
            body=None,
        )


def redirect_refused(where: str, exc: openai.APIStatusError) -> ConfigError:
    """The one-line error of a refused redirect."""
    target = hide_secrets(exc.response.headers.get("location") or "?")
    return ConfigError(
        f"{where} answered {exc.status_code} with a redirect to {target}; episodes does not follow a "
        "redirect to another origin (the transcript would go to another server). Set OPENAI_BASE_URL to "
        "the address that answers itself."
    )


class _Function(BaseModel):
    name: str
    arguments: str


class _ToolCall(BaseModel):
    function: _Function | None = None


class _Message(BaseModel):
    content: str | None = None
    refusal: str | None = None
    tool_calls: list[_ToolCall] | None = None


class _Choice(BaseModel):
    message: _Message
    finish_reason: str | None = None


class _Details(BaseModel):
    cached_tokens: int | None = None


class _Usage(BaseModel):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_tokens_details: _Details | None = None


class _Completion(BaseModel):
    """What the back end reads of a chat completion, typed: a body that does not fit is unreadable,
    whatever the SDK made of it (it builds its objects without validating them)."""

    choices: list[_Choice]
    usage: _Usage | None = None


def unreadable(raw: Any, parsed: Any) -> str | None:
    """Why ``parsed`` (the SDK's reading of ``raw``, its HTTP answer) is not a chat completion, or None."""
    from openai.types.chat import ChatCompletion

    problem = ""
    if isinstance(parsed, ChatCompletion):
        try:
            _Completion.model_validate(raw.http_response.json())
            return None
        except (ValueError, ValidationError) as exc:  # ValidationError is a ValueError
            problem = f" ({validation_summary(exc) if isinstance(exc, ValidationError) else short(exc)})"
    kind = (raw.headers.get("content-type") or "no content type").split(";")[0].strip()
    body = raw.http_response.text
    return f"a body of type {kind} (HTTP {raw.status_code}), not a chat completion{problem}: {excerpt(body)}"


def excerpt(text: str | None, limit: int = EXCERPT_CHARS) -> str:
    """The start of a body or an answer on one line, its secrets masked, quoted: what an error may show."""
    flat = " ".join((text or "").split())
    cut = flat[:limit] + ("…" if len(flat) > limit else "")
    return repr(hide_secrets(cut)) if cut else "(empty)"
