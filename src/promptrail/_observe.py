"""``@promptrail.observe``: a function call becomes a record, and a trace for the calls inside.

Works on functions, coroutine functions, generators and async generators. Arguments become
the record's input variables (``exclude`` leaves some out), the return value its output (for
generators: the yielded items, joined when they are strings), an exception makes it an error
(re-raised unchanged). Nested observed functions and the model calls inside share one trace;
``prompt_name`` and ``metadata`` pass down to them.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar, overload

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from . import _genai, _runtime
from ._capture.spans import last_record as _last_record
from ._context import OUTSIDE as _OUTSIDE
from ._context import Observation, to_json
from ._context import current as _context_current
from ._context import nested as _nested
from ._context import reset_current as _reset_current
from ._context import set_current as _set_current

P = ParamSpec("P")
R = TypeVar("R")

_MAX_ITEMS = 1000

# ``promptrail.last_request_id()`` names the last *model call*, and an observed function's
# record is a span around the calls, hidden from the request log and its score views. Ending
# its span still sets the last record (every record's end does, for the trace tree); this keeps
# (that span's ids, the model call it followed), so the call's id is what the function leaves
# behind. Per thread and task, like the last record itself.
_Ids = tuple[int, int]
_after_observed: contextvars.ContextVar[tuple[_Ids, _Ids | None] | None] = contextvars.ContextVar(
    "promptrail_after_observed", default=None
)
_MODEL_CALL_KINDS = frozenset(("llm", "embedding"))


def last_model_call() -> _Ids | None:
    """The (trace id, span id) of the last model call captured in this thread or task."""
    last = _last_record.get()
    if last is None:
        return None
    after = _after_observed.get()
    return after[1] if after is not None and after[0] == last else last


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
    kind: str | None = None,
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
    kind: str | None = None,
) -> Callable[P, R] | Callable[[Callable[P, R]], Callable[P, R]]:
    """Record each call of the decorated function, and link the model calls made inside.

    Its record is of kind ``span`` unless ``kind`` names another (``chain``, ``agent``,
    ``tool``, ``retriever``, ``llm``, ``embedding``): the request log lists ``llm`` and
    ``embedding`` records, a trace lists them all.

    >>> @promptrail.observe(prompt_name="support-reply", metadata={"team": "care"})
    ... def answer(question: str) -> str: ...
    """
    if kind is not None and kind not in _genai.KINDS:
        raise ValueError(f"kind must be one of {', '.join(sorted(_genai.KINDS))}, not {kind!r}")

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
            kind,
        )
        if inspect.isasyncgenfunction(function):
            return _wrap_async_generator(function, options)
        if inspect.isgeneratorfunction(function):
            return _wrap_generator(function, options)
        if inspect.iscoroutinefunction(function):
            return _wrap_coroutine(function, options)
        return _wrap_function(function, options)

    return decorate(func) if func is not None else decorate


_SIMPLE_KINDS = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


class _Options:
    """What a decorated function records, fixed once when it is decorated."""

    __slots__ = (
        "_order",
        "_outside_attributes",
        "_parameters",
        "_positional",
        "_simple",
        "_skip",
        "capture_input",
        "capture_output",
        "exclude",
        "kind",
        "metadata",
        "name",
        "outside",
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
        kind: str | None = None,
    ) -> None:
        self.name = name
        self.kind = kind
        self.prompt_name = prompt_name
        self.prompt_version = prompt_version
        self.metadata = metadata
        self.exclude = exclude
        self.capture_input = capture_input
        self.capture_output = capture_output
        self.signature = signature
        parameters = list(signature.parameters.values())
        # Without positional-only, *args or **kwargs, arguments map to names without a bind.
        self._simple = all(p.kind in _SIMPLE_KINDS for p in parameters)
        self._positional = tuple(
            p.name for p in parameters if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
        )
        self._order = tuple(p.name for p in parameters)
        self._parameters = frozenset(self._order)
        self._skip = exclude | {"self", "cls"}
        # Calls made outside any observation (the usual case) all see the same observation
        # and the same linkage attributes: work them out once.
        self.outside = _nested(_OUTSIDE, self)
        self._outside_attributes = _linkage_attributes(self.outside)

    def observation_in(self, outer: Observation) -> Observation:
        """The observation in force inside a call made under ``outer``."""
        return self.outside if outer is _OUTSIDE else _nested(outer, self)

    def attributes(self, observation: Observation) -> dict[str, Any]:
        """A fresh dict of the span attributes every call under ``observation`` carries."""
        if observation is self.outside:
            return self._outside_attributes.copy()
        return _linkage_attributes(observation)

    def variables(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The arguments by name, in the signature's order, minus the excluded ones."""
        positional = self._positional
        if self._simple and len(args) <= len(positional):
            skip = self._skip
            if not kwargs:
                return {k: v for k, v in zip(positional, args, strict=False) if k not in skip}
            given = dict(zip(positional, args, strict=False))
            if all(k in self._parameters and k not in given for k in kwargs):
                given.update(kwargs)
                return {k: given[k] for k in self._order if k in given and k not in skip}
        # Anything else (or a call that does not fit the signature): the general bind.
        return self._bound_variables(args, kwargs)

    def _bound_variables(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        try:
            bound = self.signature.bind_partial(*args, **kwargs)
        except TypeError:
            return {}
        values: dict[str, Any] = {}
        for key, value in bound.arguments.items():
            if key in self._skip:
                continue
            kind = self.signature.parameters[key].kind
            if kind is inspect.Parameter.VAR_KEYWORD and isinstance(value, dict):
                values.update({k: v for k, v in value.items() if k not in self.exclude})
            else:
                values[key] = value
        return values


def _linkage_attributes(observation: Observation) -> dict[str, Any]:
    return {_genai.OBSERVATION: "function", **observation.call_attributes()}


_Tokens = tuple[contextvars.Token[otel_context.Context], contextvars.Token[Observation]]


class _Scope:
    """One observed call: its span, made current only while the function's own code runs.

    A generator runs in its consumer's context, so the span and the observation context are
    attached around each step and detached before each item is handed out; the consumer's
    code between items never runs inside the generator's span.
    """

    __slots__ = ("_otel_context", "observation", "options", "span")

    def __init__(self, options: _Options, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.options = options
        self.observation = observation = options.observation_in(_context_current())
        tracer = _runtime.tracer()
        attributes = None
        if not isinstance(tracer, trace.NoOpTracer):
            # Given at the start, the attributes are checked once with the span's own;
            # with capture disabled the arguments are never serialised.
            attributes = options.attributes(observation)
            if options.kind is not None:
                attributes[_genai.KIND] = options.kind
            if options.capture_input:
                attributes[_genai.INPUT_VARIABLES] = to_json(options.variables(args, kwargs))
        self.span = span = tracer.start_span(
            options.name,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        )
        self._otel_context = trace.set_span_in_context(span)

    # Plain enter/exit rather than a context manager: this runs on every call (and every
    # generator step), where a generator-based context manager costs more than the rest.
    def enter(self) -> _Tokens:
        """Make the span and the observation current; undo with :meth:`exit`."""
        return otel_context.attach(self._otel_context), _set_current(self.observation)

    def exit(self, tokens: _Tokens) -> None:
        """Undo :meth:`enter`."""
        _reset_current(tokens[1])
        otel_context.detach(tokens[0])

    def output(self, value: Any) -> None:
        """Record what the function returned (or yielded)."""
        if self.options.capture_output and self.span.is_recording():
            self.span.set_attribute(_genai.OUTPUT, to_json(value))

    def fail(self, exc: BaseException) -> None:
        """Record the exception the function raised."""
        if self.span.is_recording():
            self.span.record_exception(exc)
            self.span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))

    def end(self) -> None:
        """End the span (it goes to the exporter); the last model call stays the last one."""
        if self.options.kind in _MODEL_CALL_KINDS:  # the function says it is a model call
            self.span.end()
            return
        last, before = _last_record.get(), last_model_call()
        self.span.end()
        ended = _last_record.get()
        if ended is not last and ended is not None:  # this span's end set it: look past it
            _after_observed.set((ended, before))

    def close(self, tokens: _Tokens, exc: BaseException | None = None) -> None:
        """After a call: leave the context, record ``exc`` if it failed, end the span."""
        self.exit(tokens)
        if exc is not None:
            self.fail(exc)
        self.end()


def _collected(items: list[Any]) -> Any:
    if items and all(isinstance(i, str) for i in items):
        return "".join(items)
    return items


def _wrap_function(function: Callable[P, R], options: _Options) -> Callable[P, R]:
    @functools.wraps(function)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        scope = _Scope(options, args, kwargs)
        tokens = scope.enter()
        try:
            result = function(*args, **kwargs)
            scope.output(result)
        except BaseException as exc:
            scope.close(tokens, exc)
            raise
        scope.close(tokens)
        return result

    return wrapper


def _wrap_coroutine(function: Callable[P, Any], options: _Options) -> Callable[P, Any]:
    @functools.wraps(function)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> Any:
        scope = _Scope(options, args, kwargs)
        tokens = scope.enter()
        try:
            result = await function(*args, **kwargs)
            scope.output(result)
        except BaseException as exc:
            scope.close(tokens, exc)
            raise
        scope.close(tokens)
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
            tokens = scope.enter()
            try:
                inner = function(*args, **kwargs)
            finally:
                scope.exit(tokens)
            while True:
                tokens = scope.enter()
                try:
                    item = next(inner)
                except StopIteration:
                    break
                finally:
                    scope.exit(tokens)
                if len(items) < _MAX_ITEMS:
                    items.append(item)
                yield item
        except GeneratorExit:
            # Closed early or garbage-collected half-read: not an error of the function.
            tokens = scope.enter()
            try:
                inner.close()
            finally:
                scope.exit(tokens)
            raise
        except BaseException as exc:
            scope.fail(exc)
            raise
        finally:
            scope.output(_collected(items))
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
                tokens = scope.enter()
                try:
                    item = await inner.__anext__()
                except StopAsyncIteration:
                    break
                finally:
                    scope.exit(tokens)
                if len(items) < _MAX_ITEMS:
                    items.append(item)
                yield item
        except GeneratorExit:
            raise
        except BaseException as exc:
            scope.fail(exc)
            raise
        finally:
            scope.output(_collected(items))
            scope.end()

    return wrapper


def current_trace_id() -> str | None:
    """Return the current trace id as 32 hex, or None outside a trace."""
    context = trace.get_current_span().get_span_context()
    return f"{context.trace_id:032x}" if context.is_valid else None
