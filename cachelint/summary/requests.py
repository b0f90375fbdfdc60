"""Generation requests: the calls that hand an engine or a server prompts, and whether each builds its
prompt where it is made or forwards what the function's callers passed in.

A request is a call of a generation method on a receiver (`llm.generate(...)`, `llm.chat(...)`, a vLLM
OpenAI front end's `create_chat_completion(...)`, also through `asyncio.to_thread`), or a call given
the URL of a generation route (`/v1/completions`, `/v1/chat/completions`, `.../generate`) with a body.
Its prompt is *forwarded* when it comes, through the function's assignments, from a parameter: the
parameter itself (`engine.generate(prompt, ...)`), a part of one (`request.messages`, `await
raw_request.json()`), or a structure holding one in a field that may carry media. A value read from
(`x["prompt"]`, `x.pop("prompt")`) or put into a text field (`prompt`, `prompt_token_ids`, ...) is text:
vLLM takes media beside those fields (`multi_modal_data`), never in them. A generation route the module
serves (`@app.post("/generate")`, `app.add_api_route(...)`) is a request forwarding what its clients
send, unless its handler (or a module function it calls by name) makes a request of its own, which then
tells. CL003 and CL004 read the requests (cachelint.text_only):
code whose own requests to an engine are all built where no multimodal input shows sends it only text.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from cachelint.summary.calls import Calls
from cachelint.summary.model import FileSummary, FunctionSummary, Request
from cachelint.summary.nodes import string_parts
from cachelint.summary.positions import SourcePositions
from cachelint.summary.walker import Frame
from cachelint.version_tests import string_value

# LLM and AsyncLLM methods that take prompts, and the methods of vLLM's OpenAI front ends
# (OpenAIServingChat, OpenAIServingCompletion) that run a request on the engine.
REQUEST_METHODS = frozenset({"generate", "chat", "beam_search", "create_chat_completion", "create_completion"})
GENERATION_ROUTE = re.compile(r"/(?:v1/completions|v1/chat/completions|generate)/?$")
ROUTE_WORDS = ("/completions", "/generate")
CALL_WORDS = (".generate", ".chat(", ".beam_search", "create_chat_completion", "create_completion")
# Keywords that carry a request's prompt or body (LLM.generate, AsyncLLM.generate, LLM.chat, HTTP posts).
PROMPT_KEYWORDS = frozenset({"prompt", "prompts", "messages", "inputs", "request", "json", "data"})
BODY_KEYWORDS = frozenset({"json", "data"})
# Fields holding text or token ids only.
TEXT_FIELDS = frozenset({"prompt", "prompts", "prompt_token_ids", "token_ids", "input_ids", "text"})
# Mapping methods that read a key's value, as a subscript does.
_MAPPING_READS = frozenset({"get", "pop", "setdefault"})
THREAD_RUNNERS = {"to_thread": 0, "run_in_executor": 1}  # where the callable is among the arguments
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


class Requests(Calls):
    """Generation requests, and whether each forwards its function's parameters."""

    def __init__(self, summary: FileSummary, source: SourcePositions, helpers: tuple[str, ...]) -> None:
        super().__init__(summary, source, helpers)
        self.lambda_parameters: list[frozenset[str]] = []
        # Routes the module serves: where each was recorded, the request, the handler's qualified name.
        self.served: list[tuple[FunctionSummary, Request, str]] = []
        text = source.text
        # Most files hold no request: they are walked as if this layer were not there.
        self.may_call = any(word in text for word in CALL_WORDS)
        self.may_post = any(word in text for word in ROUTE_WORDS)

    # -- what local names hold ------------------------------------------------------------------------

    def bind(self, target: ast.expr, value: ast.expr) -> None:
        super().bind(target, value)
        if self.may_call or self.may_post:
            self._note_value(target, value, "")

    def _note_value(self, target: ast.expr, value: ast.expr, field: str) -> None:
        if isinstance(target, ast.Name):
            self.frame.values.setdefault(target.id, []).append((field, value))
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._note_value(element.value if isinstance(element, ast.Starred) else element, value, field)
        elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            self._note_value(target.value, value, string_value(target.slice) or "?")
        elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id != "self":
            self._note_value(target.value, value, target.attr)

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        if self.may_call or self.may_post:
            self._note_value(node.target, node.iter, "")
        self.generic_visit(node)

    visit_AsyncFor = visit_For

    def visit_Lambda(self, node: ast.Lambda) -> None:
        arguments = node.args
        names = (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg)
        self.lambda_parameters.append(frozenset(arg.arg for arg in names if arg is not None))
        try:
            self.generic_visit(node)
        finally:
            self.lambda_parameters.pop()

    # -- requests -------------------------------------------------------------------------------------

    def visit_Call(self, node: ast.Call) -> None:
        if self.may_call or self.may_post:
            self._note_request(node)
        super().visit_Call(node)

    def _note_request(self, node: ast.Call) -> None:
        func = node.func
        if self.may_call and isinstance(func, ast.Attribute):
            if func.attr in REQUEST_METHODS:
                self._request(node, func, node.args, node.keywords)
                return
            runner = THREAD_RUNNERS.get(func.attr)
            if runner is not None and len(node.args) > runner:
                method = node.args[runner]
                if isinstance(method, ast.Attribute) and method.attr in REQUEST_METHODS:
                    self._request(node, method, node.args[runner + 1 :], node.keywords)
                    return
        if self.may_post and (node.args or node.keywords):
            self._note_post(node)

    def _request(
        self, node: ast.Call, method: ast.Attribute, args: list[ast.expr], keywords: list[ast.keyword]
    ) -> None:
        prompts = [args[0]] if args and not isinstance(args[0], ast.Starred) else []
        prompts += [k.value for k in keywords if k.arg in PROMPT_KEYWORDS or k.arg is None]
        prompts += [arg.value for arg in args if isinstance(arg, ast.Starred)]
        tokens = any(k.arg == "prompt_token_ids" for k in keywords)
        forwarded, helpers = self.forwarded(prompts) if prompts or tokens else (True, [])
        self._record(Request(method.attr, self.chain(method.value), node.lineno, forwarded, helpers=helpers))

    def _note_post(self, node: ast.Call) -> None:
        """A call given the URL of a generation route (`post(url, json=body)`, `_post(base, "/v1/completions",
        body)`): the body is its `json=` or `data=`, else the argument after the URL."""
        urls = [(index, route) for index, arg in enumerate(node.args) if (route := self._route(arg))]
        urls += [(-1, route) for k in node.keywords if k.arg == "url" and (route := self._route(k.value))]
        if not urls:
            return
        at, route = urls[0]
        body = next((k.value for k in node.keywords if k.arg in BODY_KEYWORDS), None)
        if body is None and 0 <= at < len(node.args) - 1:
            body = node.args[at + 1]
        forwarded, helpers = self.forwarded([body]) if body is not None else (True, [])
        request = Request(route, [], node.lineno, forwarded, helpers=helpers)
        self._record(request)
        if self.registers_route(node):
            self.served.append((self.frame.function, request, self._handler(node)))

    def _handler(self, node: ast.Call) -> str:
        """The qualified name of the function serving a route the call registers (`@app.post(...)` on
        it, `app.add_api_route(path, handler)`), when the module defines it by a plain name."""
        decorated = self.decorators.get(id(node))
        if decorated is not None:
            return "" if isinstance(decorated, ast.ClassDef) else self.qualname_for(decorated.name)[0]
        names = [arg.id for arg in (*node.args, *(k.value for k in node.keywords)) if isinstance(arg, ast.Name)]
        return names[0] if names and not self.classes and self.frame.function.qualname == "<module>" else ""

    def finish(self) -> None:
        """A route the module serves counts as a request forwarding what its clients send (they may send
        media), unless the module shows where its handler's requests go: its handler, or a module
        function the handler calls by name, makes one."""
        super().finish()
        if not self.served:
            return
        functions = {function.qualname: function for function in self.summary.functions}
        for outer, request, handler in self.served:
            if handler and _reaches_request(functions, handler):
                outer.requests.remove(request)

    def _route(self, url: ast.expr) -> str:
        values = [value for _, value in self._assigned(url.id)] if isinstance(url, ast.Name) else [url]
        for value in values:
            for branch in (value.body, value.orelse) if isinstance(value, ast.IfExp) else (value,):
                for text in string_parts(branch):
                    match = GENERATION_ROUTE.search(text)
                    if match:
                        return match.group(0)
        return ""

    def _record(self, request: Request) -> None:
        self.frame.function.requests.append(request)
        if request.chain:
            self.note_receiver(request)

    # -- forwarding -----------------------------------------------------------------------------------

    def forwarded(self, nodes: list[ast.expr]) -> tuple[bool, list[str]]:
        """Whether the value of one of `nodes` comes from the function's parameters in a part that may
        hold media; else the module functions whose results they are built from."""
        forwarding = _Forwarding(self)
        if any(forwarding.of(node, frozenset()) for node in nodes):
            return True, []
        return False, sorted(forwarding.helpers)

    def _assigned(self, name: str) -> list[tuple[str, ast.expr]]:
        for frame in reversed(self.frames):
            if name in frame.values:
                return frame.values[name]
        return []


class _Forwarding:
    """One question of `Requests.forwarded`: what each local name holds is worked out once."""

    def __init__(self, walk: Requests) -> None:
        self.walk = walk
        self.names: dict[str, bool] = {}
        self.following: set[str] = set()  # names being worked out: assignments can loop
        self.helpers: set[str] = set()  # functions whose results the value is built from

    def helper(self, func: ast.expr) -> str:
        """The function a call runs when it is a module's (`build(...)`, `utils.build(...)`), else ""."""
        if isinstance(func, ast.Name):
            return func.id
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id in self.walk.summary.imports
        ):
            return func.attr
        return ""

    def of(self, node: ast.expr, local: frozenset[str]) -> bool:
        """`local`: the comprehension variables around `node` that come from a parameter."""
        if isinstance(node, ast.Name):
            return node.id in local or self.name(node.id)
        if isinstance(node, ast.Attribute):
            return node.attr not in TEXT_FIELDS and self.of(node.value, local)
        if isinstance(node, ast.Subscript):
            return string_value(node.slice) not in TEXT_FIELDS and self.of(node.value, local)
        if isinstance(node, (ast.Await, ast.Starred)):
            return self.of(node.value, local)
        if isinstance(node, ast.Call):
            func = node.func
            if _reads_text_field(node):
                return False
            if isinstance(func, ast.Attribute) and self.of(func.value, local):
                return True
            helper = self.helper(func)
            if helper:
                self.helpers.add(helper)
            return any(self.of(arg, local) for arg in node.args) or any(
                self.of(k.value, local) for k in node.keywords if k.arg not in TEXT_FIELDS
            )
        if isinstance(node, ast.Dict):
            return any(
                self.of(value, local)
                for key, value in zip(node.keys, node.values, strict=True)
                if key is None or string_value(key) not in TEXT_FIELDS
            )
        if isinstance(node, _COMPREHENSIONS):
            return self.comprehension(node, local)
        if isinstance(node, ast.IfExp):
            return self.of(node.body, local) or self.of(node.orelse, local)
        if isinstance(node, (ast.JoinedStr, ast.Constant, ast.Lambda, ast.Compare)):
            return False
        return any(self.of(child, local) for child in _children(node))

    def name(self, name: str) -> bool:
        if name in self.names:
            return self.names[name]
        if any(name in names for names in self.walk.lambda_parameters):
            return True
        for frame in reversed(self.walk.frames):  # a closure reads the names of the functions around it
            parameters = frame_parameters(frame)
            if name in parameters:
                return True
            if name in frame.values:
                if name in self.following:
                    return False
                self.following.add(name)
                found = any(
                    field not in TEXT_FIELDS and self.of(value, frozenset()) for field, value in frame.values[name]
                )
                self.following.discard(name)
                self.names[name] = found
                return found
        return False

    def comprehension(
        self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp, local: frozenset[str]
    ) -> bool:
        inner = set(local)
        for generator in node.generators:
            if self.of(generator.iter, frozenset(inner)):
                inner.update(name.id for name in ast.walk(generator.target) if isinstance(name, ast.Name))
        elements = (node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,)
        return any(self.of(element, frozenset(inner)) for element in elements)


# Annotations of values that hold no media: a string or a number (or None). Not a list of them: a
# `prompts: list[str]` handed to `chat()` is a list of messages, whatever the annotation says.
_PLAIN_TYPES = frozenset({"str", "int", "float", "bool", "bytes", "None"})
_PLAIN_WRAPPERS = frozenset({"Optional", "Union", "typing"})


def parameter_names(arguments: ast.arguments) -> frozenset[str]:
    """The names a function's callers give values that may hold media to: not `self` and `cls`, nor
    those annotated as a string or a number (`model: str`)."""
    names = [
        arg.arg
        for arg in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg)
        if arg is not None and not (arg.annotation is not None and _plain(arg.annotation))
    ]
    return frozenset(names) - {"self", "cls"}


def _plain(annotation: ast.expr) -> bool:
    """Whether an annotation names a string or a number only (`str`, `int | None`, `Optional[str]`)."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return False
    names = {_name(node) for node in ast.walk(annotation) if isinstance(node, (ast.Name, ast.Attribute))}
    return bool(names - _PLAIN_WRAPPERS) and names <= _PLAIN_TYPES | _PLAIN_WRAPPERS


def _name(node: ast.Name | ast.Attribute) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr


def frame_parameters(frame: Frame) -> frozenset[str]:
    """The parameters of the frame's function that may hold media, read once."""
    if frame.parameters is None:
        frame.parameters = parameter_names(frame.arguments) if frame.arguments is not None else frozenset()
    return frame.parameters


def _reaches_request(functions: dict[str, FunctionSummary], qualname: str) -> bool:
    """Whether the function, or a module function it calls by name (at any depth), makes a request."""
    seen = {qualname}
    queue = [qualname]
    while queue:
        function = functions.get(queue.pop())
        if function is None:
            continue
        if function.requests:
            return True
        for call in function.calls:
            if not call.chain and call.via == "direct" and call.name not in seen:
                seen.add(call.name)
                queue.append(call.name)
    return False


def _reads_text_field(call: ast.Call) -> bool:
    """Whether a call reads a text field of a mapping, as `mapping["prompt"]` does: `.get("prompt")`,
    `.pop("prompt", None)`."""
    func = call.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr in _MAPPING_READS
        and bool(call.args)
        and string_value(call.args[0]) in TEXT_FIELDS
    )


def _children(node: ast.expr) -> Iterator[ast.expr]:
    """The expressions directly inside `node` (lists, tuples, operators, conditionals, ...)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.expr):
            yield child
