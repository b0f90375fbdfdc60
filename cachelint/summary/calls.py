"""Calls: every call of a function (for the project call graph) and the cache-reset events among them
(resets, pauses, sleeps, worker-side clears, HTTP routes), with whether each is awaited or consumed.
"""

from __future__ import annotations

import ast
import re
from urllib.parse import parse_qsl

from cachelint.provenance import resolve_dotted
from cachelint.summary.compat import Compat, engine_argument_names, is_processor_cache_setdefault
from cachelint.summary.model import (
    LIFECYCLE_METHODS,
    PAUSE_METHODS,
    RESET_METHODS,
    SGLANG_METHODS,
    WEIGHT_PUSH_NAMES,
    CallSite,
    FileSummary,
    ResetEvent,
)
from cachelint.summary.nodes import DISPATCH_HELPERS, RPC_METHODS, last_name, rpc_name, string_parts, unawaited
from cachelint.summary.positions import SourcePositions
from cachelint.version_tests import dotted_name, string_value

AWAITING_WRAPPERS = frozenset(
    {"gather", "create_task", "ensure_future", "wait_for", "wait", "run", "shield", "get", "as_completed"}
)
HTTP_ROUTE = re.compile(r"/(reset_prefix_cache|reset_mm_cache|reset_encoder_cache|pause|sleep)(?:\b|$)")
# SGLang's server routes for its weight-update and cache methods (and its pause, which vLLM names /pause).
SGLANG_ROUTE = re.compile(r"/(" + "|".join(sorted(SGLANG_METHODS)) + r"|pause_generation)\b")


# The nodes a string can be written as (nodes.string_parts); no other argument names a route.
_STRING_NODES = (ast.Constant, ast.JoinedStr, ast.BinOp)
# Calls that register a route of a server the project runs (`app.add_api_route("/pause", pause)`,
# aiohttp's `app.router.add_post("/flush_cache", handler)`); a decorator call (`@app.post("/pause")`)
# does too, and so does a route definition of aiohttp (`web.post("/flush_cache", handler)`). None sends
# a request.
_ROUTE_REGISTRATIONS = frozenset(
    {
        "add_api_route",
        "add_route",
        "add_url_rule",
        "api_route",
        "route",
        "add_get",
        "add_post",
        "add_put",
        "add_patch",
        "add_delete",
        "add_api_websocket_route",
    }
)
# aiohttp's route definitions (`web.post(path, handler)`), by the module they come from.
_ROUTE_DEFINITIONS = ("aiohttp.web.", "aiohttp.web_routedef.")
# Words one of which a file's text must hold for a string in it to name a cache route, or for a call in
# it to be an SGLang event (whose request fields are then read from the requests built before it).
_ROUTE_WORDS = (
    "/pause",
    "/sleep",
    "pause_generation",
    "reset_prefix_cache",
    "reset_mm_cache",
    "reset_encoder_cache",
    *sorted(SGLANG_METHODS),
)


class Calls(Compat):
    """Calls and cache-reset events."""

    def __init__(self, summary: FileSummary, source: SourcePositions, helpers: tuple[str, ...]) -> None:
        super().__init__(summary, source, helpers)
        # Most files name no cache route and no SGLang method: their strings are not searched for one.
        self.may_name_route = any(word in source.text for word in _ROUTE_WORDS)

    # -- awaiting ------------------------------------------------------------------------------------

    def visit_Await(self, node: ast.Await) -> None:
        self.awaited.add(id(node.value))
        if isinstance(node.value, ast.Name):
            for event in self.frame.stored_calls.pop(node.value.id, []):
                event.consumed = True
        self.generic_visit(node)

    # -- calls ---------------------------------------------------------------------------------------

    def visit_Call(self, node: ast.Call) -> None:
        self._record_call(node)
        self.generic_visit(node)

    def _record_call(self, node: ast.Call) -> None:
        func = node.func
        name = last_name(func)
        if name in AWAITING_WRAPPERS or name == "to_thread":
            for arg in node.args:
                self._mark_consumed(arg)
        if name == "super":
            return
        self.note_keywords(node)
        if is_processor_cache_setdefault(name, node):
            self.workaround("setdefault")
        if name == "setdefault" and len(node.args) >= 2 and string_value(node.args[0]) in engine_argument_names():
            key = string_value(node.args[0])
            assert key is not None
            self.argument_use(key, "setdefault", "setdefault", node.args[0], node.args[1], [])
        if isinstance(func, ast.Name) and func.id in ("hasattr", "getattr"):
            self.note_probe(node, func.id)
        if name in ("to_thread", "run_in_executor"):
            self._note_callable_argument(node)
        self._note_super_call(node)
        if self.may_name_route:
            self._note_http_route(node)

        if isinstance(func, ast.Attribute):
            if func.attr == "remote" and isinstance(func.value, ast.Attribute):
                self._call(node, func.value.attr, func.value.value, "remote", record_reset=False)
            elif func.attr in RPC_METHODS:
                method = rpc_name(node)
                if method:
                    self._call(node, method, func.value, "rpc")
            else:
                self._call(node, func.attr, func.value, "direct")
        elif isinstance(func, ast.Name):
            alias = self.frame.method_aliases.get(func.id)
            if alias is not None:
                chain, method, receiver_text = alias
                self._reset(node, method, receiver_text, chain, "alias")
            elif func.id in DISPATCH_HELPERS:
                method = rpc_name(node)
                if method:
                    self._call(node, method, None, "dispatch")
            else:
                bound = self._bound_method(func.id)
                if bound is not None:
                    self._call(node, bound[-1], bound[:-1], "direct", record_reset=False)
                else:
                    self._call(node, func.id, None, "direct")

    def _mark_consumed(self, value: ast.expr) -> None:
        if isinstance(value, ast.Call):
            self.consumed.add(id(value))
        elif isinstance(value, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            self._mark_consumed(value.elt)
        elif isinstance(value, ast.Starred):
            self._mark_consumed(value.value)
        elif isinstance(value, (ast.List, ast.Tuple)):
            for element in value.elts:
                self._mark_consumed(element)

    def _note_callable_argument(self, node: ast.Call) -> None:
        for arg in node.args:
            if isinstance(arg, (ast.Name, ast.Attribute)):
                receiver = arg.value if isinstance(arg, ast.Attribute) else None
                self._call(node, last_name(arg), receiver, "direct", record_reset=False)
                return

    def _note_super_call(self, node: ast.Call) -> None:
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Call)
            and dotted_name(func.value.func) == "super"
        ):
            self.frame.function.super_calls.append(func.attr)

    def registers_route(self, node: ast.Call) -> bool:
        """Whether a call defines a route of a server the project runs rather than sending a request."""
        if id(node) in self.decorators or last_name(node.func) in _ROUTE_REGISTRATIONS:
            return True
        dotted = dotted_name(node.func) or ""
        return resolve_dotted(dotted, self.summary.imports).startswith(_ROUTE_DEFINITIONS)

    def _note_http_route(self, node: ast.Call) -> None:
        """A call given the URL of a cache route, as a literal or a local it was assigned to."""
        if self.registers_route(node):
            return
        for arg in (*node.args, *(keyword.value for keyword in node.keywords)):
            if isinstance(arg, ast.Name):
                method = self.frame.routes.get(arg.id, "")
                if method:
                    self._reset(node, method, "", [], "http")
                    return
                method = self.frame.sglang_routes.get(arg.id, "")
                if method:
                    self._reset(node, method, "", [], "http", sglang=True)
                    return
                continue
            if not isinstance(arg, _STRING_NODES):
                continue
            method = route_method(arg)
            if method:
                self._reset(node, method, "", [], "http", url=arg)
                return
            method = sglang_route(arg) or sglang_endpoint(node, arg)
            if method:
                self._reset(node, method, "", [], "http", sglang=True)
                return

    def bind(self, target: ast.expr, value: ast.expr) -> None:
        super().bind(target, value)
        if isinstance(target, ast.Name) and self.may_name_route:
            method = route_method(value)
            if method:
                self.frame.routes[target.id] = method
            else:
                self.frame.routes.pop(target.id, None)
            sglang = sglang_route(value) if isinstance(value, _STRING_NODES) else ""
            if sglang:
                self.frame.sglang_routes[target.id] = sglang
            else:
                self.frame.sglang_routes.pop(target.id, None)
            fields = self._fields(value)
            if fields is not None:
                self.frame.requests[target.id] = fields
            else:
                self.frame.requests.pop(target.id, None)

    def _fields(self, value: ast.expr) -> dict[str, str] | None:
        """The fields of a request built in place: an SGLang `...ReqInput(name=value)` or a dict literal
        (a JSON payload); None for anything else."""
        if isinstance(value, ast.Call) and last_name(value.func).endswith("ReqInput"):
            return {k.arg: self.source.segment(k.value) for k in value.keywords if k.arg is not None}
        if isinstance(value, ast.Dict):
            keys = [(string_value(key), item) for key, item in zip(value.keys, value.values, strict=True) if key]
            return {name: self.source.segment(item) for name, item in keys if name is not None}
        if isinstance(value, ast.Name):
            return self.frame.requests.get(value.id)
        return None

    def request_fields(self, node: ast.Call) -> dict[str, str]:
        """The fields of the requests a call sends (`tm.update_weights_from_tensor(obj, None)` with
        `obj = UpdateWeightsFromTensorReqInput(flush_cache=False)`, `post(url, json={...})`)."""
        found: dict[str, str] = {}
        for value in (*node.args, *(keyword.value for keyword in node.keywords)):
            found.update(self._fields(value) or {})
        return found

    def _bound_method(self, name: str) -> list[str] | None:
        """The method a local name holds (`sync = self._sync_adapter`, in this function or one it is
        nested in), as its chain; None when the name holds no attribute."""
        for frame in reversed(self.frames):
            chain = frame.aliases.get(name)
            if chain is not None:
                return chain if len(chain) > 1 and "?" not in chain else None
        return None

    def _call(
        self,
        node: ast.Call,
        name: str,
        receiver: ast.expr | list[str] | None,
        via: str,
        record_reset: bool = True,
    ) -> None:
        """Record a call of `name` on `receiver` (a node, or the chain of a bound method's object)."""
        if isinstance(receiver, list):
            chain, receiver_text = receiver, ".".join(receiver)
        else:
            chain = self.chain(receiver) if receiver is not None else []
            receiver_text = self.receiver_text(receiver) if receiver is not None else ""
        call_site = CallSite(name, receiver_text, chain, via, self.source.span(node), id(node) in self.awaited)
        if via == "rpc" or name in WEIGHT_PUSH_NAMES:
            call_site.anchor = self.anchor(self.statements[-1] if self.statements else self.header())
        self.frame.function.calls.append(call_site)
        if chain:
            self.note_receiver(call_site)
        if not record_reset:
            return
        if name in SGLANG_METHODS and via in ("direct", "remote"):
            self._reset(node, name, receiver_text, chain, via, sglang=True)
        elif name in RESET_METHODS or name in PAUSE_METHODS or name == "reload_weights":
            if name == "pause_generation" and via == "direct":
                self._reset(node, name, receiver_text, chain, via, sglang=True)
            self._reset(node, name, receiver_text, chain, via)
        elif name == "clear" and chain and chain[-1] == "encoder_cache":
            self._reset(node, "clear", receiver_text, chain, via)
        elif name == "reset" and chain and chain[-1] == "encoder_cache_manager":
            self._reset(node, "reset", receiver_text, chain, via)
        elif name in LIFECYCLE_METHODS:
            self._reset(node, name, receiver_text, chain, via)

    def sent_fields(self, node: ast.Call, url: ast.expr | None) -> dict[str, tuple[str, str]]:
        """The arguments an HTTP request sends, each as (source text, where): from the URL's query string
        (`/pause?clear_cache=false`: a string literal, as `params=` would send it) and `params=`
        ("query"), and from `json=` / `data=` ("body"). A value the code computes in the URL is left out."""
        found: dict[str, tuple[str, str]] = {}
        for keyword in node.keywords:
            where = {"params": "query", "json": "body", "data": "body"}.get(keyword.arg or "")
            if where is not None:
                fields = self._fields(keyword.value) or {}
                found.update((name, (value, where)) for name, value in fields.items())
        if url is not None:
            text = "".join(string_parts(url)) if not isinstance(url, ast.JoinedStr) else _with_holes(url)
            if "?" in text:
                for name, value in parse_qsl(text.split("?", 1)[1], keep_blank_values=True):
                    if _HOLE not in name and _HOLE not in value:
                        found.setdefault(name, (repr(value), "query"))
        return found

    def _reset(
        self,
        node: ast.Call,
        method: str,
        receiver: str,
        chain: list[str],
        via: str,
        sglang: bool = False,
        url: ast.expr | None = None,
    ) -> None:
        statement = self.statements[-1] if self.statements else None
        statement_span = self.source.span(statement) if statement is not None else self.source.span(node)
        gates, hasattr_guarded = self.current_gates(statement)
        keywords: dict[str, str] = {}
        star_kwargs: list[str] = []
        for keyword in node.keywords:
            if keyword.arg is not None:
                keywords[keyword.arg] = self.source.segment(keyword.value)
            else:
                star_kwargs.append(self.source.segment(keyword.value))
                if isinstance(keyword.value, ast.Name):
                    gate = self.kwargs_gate(keyword.value.id)
                    if gate is not None:
                        gates.append(gate)
        arguments = list(node.args)
        if via == "rpc":
            keywords.pop("method", None)
            if arguments and string_value(arguments[0]) is not None:
                arguments = arguments[1:]
        awaited = id(node) in self.awaited
        event = ResetEvent(
            method=method,
            receiver=receiver,
            chain=chain,
            receiver_class="",
            via=via,
            awaited=awaited,
            in_async=self.frame.function.is_async,
            span=self.source.span(node),
            callee_span=self.source.span(node.func),
            statement_span=statement_span,
            anchor=self.anchor(statement or self.header()),
            keywords=keywords,
            positional=[self.source.segment(arg) for arg in arguments if not isinstance(arg, ast.Starred)],
            star_kwargs=star_kwargs,
            gates=gates,
            hasattr_guarded=hasattr_guarded,
            consumed=awaited or id(node) in self.consumed,
            result_ignored=isinstance(statement, ast.Expr) and unawaited(statement.value) is node,
            passed_on=statement is not None and _passed_on(node, statement),
            runner=self._runner(node, statement),
            keyword_spans={k.arg: self.source.span(k) for k in node.keywords if k.arg is not None},
            compat_guards=self.compat_guards(),
        )
        if via == "http" and not sglang:
            for name, (value, where) in self.sent_fields(node, url).items():
                if name not in event.keywords:
                    event.keywords[name] = value
                    event.sent_in[name] = where
        if sglang:
            event.keywords = {**self.request_fields(node), **event.keywords}
            self.frame.function.sglang.append(event)
        elif method in LIFECYCLE_METHODS:
            self.frame.function.lifecycle.append(event)
        else:
            self.frame.function.resets.append(event)
        self.note_receiver(event)
        if not event.consumed and isinstance(statement, ast.Assign) and statement.value is node:
            targets = statement.targets
            if len(targets) == 1 and isinstance(targets[0], ast.Name):
                self.frame.stored_calls.setdefault(targets[0].id, []).append(event)

    def _runner(self, node: ast.Call, statement: ast.stmt | None) -> str:
        """The callee of the statement `runner(<node>)`, or ""."""
        if not isinstance(statement, ast.Expr) or not isinstance(statement.value, ast.Call):
            return ""
        outer = statement.value
        if len(outer.args) != 1 or outer.args[0] is not node or outer.keywords:
            return ""
        if not isinstance(outer.func, (ast.Name, ast.Attribute)):
            return ""
        return self.source.segment(outer.func)


def _passed_on(node: ast.Call, statement: ast.stmt) -> bool:
    """Whether the call is in an argument of another call of the statement."""
    for outer in ast.walk(statement):
        if isinstance(outer, ast.Call) and outer is not node:
            arguments = [*outer.args, *(keyword.value for keyword in outer.keywords)]
            if any(inner is node for argument in arguments for inner in ast.walk(argument)):
                return True
    return False


_HOLE = "\x00"  # stands for a value an f-string computes


def _with_holes(node: ast.JoinedStr) -> str:
    """An f-string's text, each computed part a hole."""
    return "".join(
        value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) else _HOLE
        for value in node.values
    )


def sglang_route(node: ast.expr) -> str:
    """The SGLang method whose server route a URL names (`f"{url}/flush_cache"`), or ""."""
    for text in string_parts(node):
        match = SGLANG_ROUTE.search(text)
        if match:
            return match.group(1)
    return ""


# Words of the name of a project helper that builds a request or a URL from a route's name.
_ENDPOINT_HELPER_WORDS = ("request", "post", "url", "endpoint", "route")


def sglang_endpoint(node: ast.Call, arg: ast.expr) -> str:
    """An SGLang method named alone to a project's request or URL helper: `self._make_request("flush_cache")`,
    `self._url(rank, "update_weights_from_ipc")`."""
    text = string_value(arg)
    name = last_name(node.func).lower()
    if text in SGLANG_METHODS and any(word in name for word in _ENDPOINT_HELPER_WORDS):
        return text
    return ""


def route_method(node: ast.expr) -> str:
    """The engine method whose route a URL names (`f"{base}/reset_prefix_cache"`), or ""."""
    for text in string_parts(node):
        match = HTTP_ROUTE.search(text)
        if match:
            return "pause_generation" if match.group(1) == "pause" else match.group(1)
    return ""
