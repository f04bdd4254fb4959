"""``@promptrail.observe``: a function call becomes a record, and a trace for the calls inside.

Works on functions, coroutine functions, generators and async generators. Arguments become
the record's input variables (``exclude`` leaves some out), the return value its output (for
generators: the yielded items, joined when they are strings), an exception makes it an error
(re-raised unchanged). Nested observed functions and the model calls inside share one trace;
``prompt_name`` and ``metadata`` pass down to them.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar, overload

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode

from . import _genai, _runtime
from ._context import current as _context_current
from ._context import nested as _nested
from ._context import reset_current as _reset_current
from ._context import set_current as _set_current
from ._context import to_json

P = ParamSpec("P")
R = TypeVar("R")

_MAX_ITEMS = 1000


@overload
def observe(func: Callable[P, R], /) -> Callable[P, R]: ...


@overload
def observe(
    func: None = None,
    /,
    *,
    name: str | None = None,
    prompt_name: str | None = None,
    prompt_version: int | None = None,
    metadata: Mapping[str, Any] | None = None,
    exclude: Sequence[str] = (),
    capture_input: bool = True,
    capture_output: bool = True,
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...


def observe(
    func: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    prompt_name: str | None = None,
    prompt_version: int | None = None,
    metadata: Mapping[str, Any] | None = None,
    exclude: Sequence[str] = (),
    capture_input: bool = True,
    capture_output: bool = True,
) -> Callable[P, R] | Callable[[Callable[P, R]], Callable[P, R]]:
    """Record each call of the decorated function, and link the model calls made inside.

    >>> @promptrail.observe(prompt_name="support-reply", metadata={"team": "care"})
    ... def answer(question: str) -> str: ...
    """

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        options = _Options(
            name or function.__qualname__,
            prompt_name,
            prompt_version,
            dict(metadata or {}),
            frozenset(exclude),
            capture_input,
            capture_output,
            inspect.signature(function),
        )
        if inspect.isasyncgenfunction(function):
            return _wrap_async_generator(function, options)
        if inspect.isgeneratorfunction(function):
            return _wrap_generator(function, options)
        if inspect.iscoroutinefunction(function):
            return _wrap_coroutine(function, options)
        return _wrap_function(function, options)

    return decorate(func) if func is not None else decorate


class _Options:
    __slots__ = (
        "capture_input",
        "capture_output",
        "exclude",
        "metadata",
        "name",
        "prompt_name",
        "prompt_version",
        "signature",
    )

    def __init__(
        self,
        name: str,
        prompt_name: str | None,
        prompt_version: int | None,
        metadata: dict[str, Any],
        exclude: frozenset[str],
        capture_input: bool,
        capture_output: bool,
        signature: inspect.Signature,
    ) -> None:
        self.name = name
        self.prompt_name = prompt_name
        self.prompt_version = prompt_version
        self.metadata = metadata
        self.exclude = exclude
        self.capture_input = capture_input
        self.capture_output = capture_output
        self.signature = signature

    def variables(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        try:
            bound = self.signature.bind_partial(*args, **kwargs)
        except TypeError:
            return {}
        values: dict[str, Any] = {}
        for key, value in bound.arguments.items():
            if key in self.exclude or key in ("self", "cls"):
                continue
            kind = self.signature.parameters[key].kind
            if kind is inspect.Parameter.VAR_KEYWORD and isinstance(value, dict):
                values.update({k: v for k, v in value.items() if k not in self.exclude})
            else:
                values[key] = value
        return values


class _Scope:
    """One observed call: its span, made current only while the function's own code runs.

    A generator runs in its consumer's context, so the span and the observation context are
    attached around each step and detached before each item is handed out; the consumer's
    code between items never runs inside the generator's span.
    """

    def __init__(self, options: _Options, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        outer = _context_current()
        self.observation = _nested(outer, options)
        self.span = _runtime.tracer().start_span(
            options.name, record_exception=False, set_status_on_exception=False
        )
        self._otel_context = trace.set_span_in_context(self.span)
        if self.span.is_recording():
            attributes: dict[str, Any] = {_genai.OBSERVATION: "function"}
            if self.observation.prompt_name:
                attributes[_genai.PROMPT_NAME] = self.observation.prompt_name
            if self.observation.version:
                attributes[_genai.PROMPT_VERSION] = self.observation.version
            if self.observation.metadata:
                attributes[_genai.METADATA] = to_json(self.observation.metadata)
            if options.capture_input:
                attributes[_genai.INPUT_VARIABLES] = to_json(options.variables(args, kwargs))
            self.span.set_attributes(attributes)

    @contextmanager
    def active(self) -> Iterator[None]:
        otel_token = otel_context.attach(self._otel_context)
        observation_token = _set_current(self.observation)
        try:
            yield
        finally:
            _reset_current(observation_token)
            otel_context.detach(otel_token)

    def fail(self, exc: BaseException) -> None:
        if self.span.is_recording():
            self.span.record_exception(exc)
            self.span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))

    def end(self) -> None:
        self.span.end()


@contextmanager
def _span(options: _Options, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Iterator[Span]:
    scope = _Scope(options, args, kwargs)
    try:
        with scope.active():
            yield scope.span
    except BaseException as exc:
        scope.fail(exc)
        raise
    finally:
        scope.end()


def _set_output(span: Span, options: _Options, value: Any) -> None:
    if options.capture_output and span.is_recording():
        span.set_attribute(_genai.OUTPUT, to_json(value))


def _collected(items: list[Any]) -> Any:
    if items and all(isinstance(i, str) for i in items):
        return "".join(items)
    return items


def _wrap_function(function: Callable[P, R], options: _Options) -> Callable[P, R]:
    @functools.wraps(function)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with _span(options, args, kwargs) as span:
            result = function(*args, **kwargs)
            _set_output(span, options, result)
            return result

    return wrapper


def _wrap_coroutine(function: Callable[P, Any], options: _Options) -> Callable[P, Any]:
    @functools.wraps(function)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> Any:
        with _span(options, args, kwargs) as span:
            result = await function(*args, **kwargs)
            _set_output(span, options, result)
            return result

    return wrapper


def _wrap_generator(
    function: Callable[P, Generator[Any, Any, Any]], options: _Options
) -> Callable[P, Any]:
    @functools.wraps(function)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> Iterator[Any]:
        scope = _Scope(options, args, kwargs)
        items: list[Any] = []
        try:
            with scope.active():
                inner = function(*args, **kwargs)
            while True:
                with scope.active():
                    try:
                        item = next(inner)
                    except StopIteration:
                        break
                if len(items) < _MAX_ITEMS:
                    items.append(item)
                yield item
        except GeneratorExit:
            # Closed early or garbage-collected half-read: not an error of the function.
            with scope.active():
                inner.close()
            raise
        except BaseException as exc:
            scope.fail(exc)
            raise
        finally:
            _set_output(scope.span, options, _collected(items))
            scope.end()

    return wrapper


def _wrap_async_generator(
    function: Callable[P, AsyncIterator[Any]], options: _Options
) -> Callable[P, Any]:
    @functools.wraps(function)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> AsyncIterator[Any]:
        scope = _Scope(options, args, kwargs)
        items: list[Any] = []
        inner = function(*args, **kwargs)
        try:
            while True:
                with scope.active():
                    try:
                        item = await inner.__anext__()
                    except StopAsyncIteration:
                        break
                if len(items) < _MAX_ITEMS:
                    items.append(item)
                yield item
        except GeneratorExit:
            raise
        except BaseException as exc:
            scope.fail(exc)
            raise
        finally:
            _set_output(scope.span, options, _collected(items))
            scope.end()

    return wrapper


def current_trace_id() -> str | None:
    """Return the current trace id as 32 hex, or None outside a trace."""
    context = trace.get_current_span().get_span_context()
    return f"{context.trace_id:032x}" if context.is_valid else None
