"""The request path without the overhead that buys no fidelity.

Profiled on a loopback PutItem/GetItem loop (cProfile, moto 5.2.5), moto's server spent
most of each request outside DynamoDB: looking up the backend for the request's host
(every lookup lists moto's package directory and stats each of its ~200 entries, under
one global lock), routing through a Flask app, listing the handler class's methods with
`inspect` on every call, and opening a TCP connection and a thread per request (the
werkzeug development server closes every connection). None of that changes an answer.
So with the fast path on (the default; IDEMLAB_FAST_PATH=0 turns it off, for the bench's
before/after comparison) each host's backend and each class's method names are looked up
once (both pure functions of their input), and the functions below each remove one cost.

Measured with the same boto3-signed requests sent as raw HTTP (bench/embedded.py), the
server's own CPU per PutItem went from ~1.2-1.4 ms (plain moto) to ~0.25 ms; a boto3
client spends ~0.5 ms of CPU of its own per call, which is why the bench prints both.

What stays exactly as it was: the loopback Host/Origin guard runs first on every request,
every request to DynamoDB is still serialised by dynamodb_atomic's lock, and anything
the short path does not recognise takes moto's full route.
"""

from __future__ import annotations

import functools
import http.client
import io
import json
import os
import re
import sys
from urllib.parse import unquote
from wsgiref.headers import Headers

from idemlab.embedded.patching import wrap

FAST_PATH_VARIABLE = "IDEMLAB_FAST_PATH"
# The actions the lessons' handlers and workflows call on every delivery, as X-Amz-Target names them.
HOT_DYNAMODB_ACTIONS = ("PutItem", "GetItem", "UpdateItem", "DeleteItem", "Query", "TransactWriteItems")
HOT_DYNAMODB_TARGETS = frozenset(f"DynamoDB_20120810.{action}" for action in HOT_DYNAMODB_ACTIONS)
# Lambda's Invoke API: POST /2015-03-31/functions/{FunctionName}/invocations
INVOKE_PATH = re.compile(r"^/2015-03-31/functions/(?P<name>[^/]+)/invocations$")
KEEP_ALIVE_IDLE_SECONDS = 120  # an idle kept-alive connection (and its thread) closes after this long
UNPLAIN_HEADERS = ("transfer-encoding", "expect")  # they take werkzeug's route (keep_alive_handler)
# Never form data: werkzeug's Request would find no form, files or values in these.
JSON_CONTENT_TYPES = ("application/x-amz-json-1.0", "application/x-amz-json-1.1")
_PLAIN_HOST = re.compile(r"^[A-Za-z0-9.-]+(:[0-9]{1,5})?$|^\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?$")


def enabled() -> bool:
    return os.environ.get(FAST_PATH_VARIABLE, "1") != "0"


def app_and_handler():
    """moto's WSGI app and request handler class, with the fast path on or off. Called
    after every other install() of the server, so the cached method names include the
    patched methods."""
    from moto.core import responses, utils
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app

    dispatcher = DomainDispatcherApplication(create_backend_app)
    if not enabled():
        print(f"embedded: fast path off ({FAST_PATH_VARIABLE}=0)", file=sys.stderr, flush=True)
        return dispatcher, MotoRequestHandler
    dispatcher.get_backend_for_host = functools.cache(dispatcher.get_backend_for_host)
    # `BaseResponse.call_action` lists its class's methods on every call.
    responses.method_names_from_class = functools.cache(utils.method_names_from_class)
    lean_json_errors()
    cached_condition_parses()
    quick_random_strings()
    known_account_backends()
    return short_paths(dispatcher), keep_alive_handler()


def lean_json_errors() -> None:
    """moto's JSON error (`JsonRESTError`, the base of every DynamoDB error such as a
    refused condition) first renders an XML error document with xmltodict, then replaces
    it with its JSON one: ~14 % of a refused conditional write's CPU in moto. The same
    attributes, set without the discarded XML."""
    from moto.core.exceptions import JsonRESTError
    from werkzeug.exceptions import HTTPException

    def __init__(self, error_type: str, message: str, _: str = "", **__) -> None:
        HTTPException.__init__(self)
        self.error_type = error_type
        self.message = message
        self.content_type = "application/json"
        self.description = json.dumps({"__type": error_type, "message": message})

    JsonRESTError.__init__ = __init__


def known_account_backends() -> None:
    """Every `lambda_backends[account]` (and each other service's) takes moto's global
    backend lock and then checks that the service's dict is registered with `not in` over
    a list of some 150 of them, which compares the dicts by value: ~30 us a lookup under
    cProfile, three lookups a warm Invoke (its backend, and IAM's for the access key's last
    use). Once an account's backend exists and the dict is registered, moto's check
    changes nothing: only then is it skipped (an account moto has not seen, or one its
    reset removed, takes moto's own path)."""
    from moto.core.base_backend import BackendDict

    registered: set[int] = set()  # ids of BackendDicts moto has registered; they live as long as the process

    @wrap(BackendDict, "_create_account_specific_backend")
    def create(original, self, account_id: str) -> None:
        if id(self) in registered and dict.__contains__(self, account_id):
            return
        original(self, account_id)
        registered.add(id(self))


def quick_random_strings() -> None:
    """moto makes up a 52-character request id for every answer (and names, ids, tokens
    elsewhere) with one `random.choice` call per character: ~60 us an answer (timeit, on a
    loaded 2-core machine), a large share of a hot DynamoDB request's server CPU on the fast
    path. `random.choices` draws from the same pool, with moto's own (seedable) generator,
    in one call: ~20 us."""
    import string

    from moto.moto_api._internal.moto_random import MotoRandom

    def get_random_string(self, length: int = 20, include_digits: bool = True, lower_case: bool = False) -> str:
        pool = string.ascii_letters + (string.digits if include_digits else "")
        text = "".join(self.choices(pool, k=length))
        return text.lower() if lower_case else text

    MotoRandom.get_random_string = get_random_string


def cached_condition_parses() -> None:
    """moto parses a write's condition twice (the handler to check its names, the table
    to evaluate it) and again on every request: ~1/3 of a conditional write's CPU. The
    parse depends on the expression, the names and, of the values, only on which names
    exist and each one's type: a value becomes an `AttributeValue` leaf of the tree. So a
    successful parse is kept per (expression, names, value names and types), made with
    placeholder values, and each later parse gets a copy of that tree with the request's
    own values in its leaves (moto never changes a tree while evaluating it). A parse that
    fails is never kept: moto's own parse raises its own error every time."""
    from moto.dynamodb.comparisons import AttributeValue, ConditionExpressionParser, Func, Op

    parses: dict = {}  # only ever used inside DynamoHandler.call_action, under dynamodb_atomic's lock

    def bound(node, leaves: dict, holders: set):
        """The tree with the request's values in its placeholder leaves; the branches
        without one (paths, functions of paths) are shared, not copied."""
        if isinstance(node, (list, tuple)):
            return type(node)(bound(child, leaves, holders) for child in node)
        if isinstance(node, AttributeValue):
            return leaves.get(id(node.value), node)
        if id(node) not in holders:
            return node
        copy = object.__new__(type(node))
        copy.__dict__ = {name: bound(value, leaves, holders) for name, value in node.__dict__.items()}
        return copy

    def holding(node, holders: set) -> bool:
        """Note every Op and Func above a placeholder leaf in `holders`."""
        # A list, not a generator: every child must be visited (and marked), so any() must not stop early.
        if isinstance(node, (list, tuple)):
            return any([holding(child, holders) for child in node])  # noqa: C419
        if isinstance(node, (Op, Func)) and any([holding(value, holders) for value in node.__dict__.values()]):  # noqa: C419
            holders.add(id(node))
            return True
        return isinstance(node, AttributeValue)

    def parse(original, self):
        expression = self.condition_expression
        names = self.expression_attribute_names
        values = self.expression_attribute_values
        if not (
            isinstance(expression, str)
            and expression
            and isinstance(names or {}, dict)
            and isinstance(values or {}, dict)
            and all(isinstance(name, str) for name in (names or {}).values())
            and all(isinstance(value, dict) and len(value) == 1 for value in (values or {}).values())
        ):
            return original(self)
        types = None if values is None else tuple((name, *value) for name, value in values.items())
        key = (expression, None if names is None else tuple(names.items()), types)
        entry = parses.get(key)
        if entry is None:
            op = original(self)  # moto's parse of the request's own values, errors and all
            slots = {name: object() for name in values or ()}
            placeholders = {name: {kind: slots[name]} for name, kind in types or ()}
            placeholder = ConditionExpressionParser(expression, names, placeholders)
            if len(parses) >= 1024:
                parses.clear()
            tree = original(placeholder)
            holders = set()
            holding(tree, holders)
            found = (placeholder.expr_attr_names_found, placeholder.expr_attr_values_found)
            parses[key] = (tree, holders, [(slot, name) for name, slot in slots.items()], *found)
            return op
        tree, holders, slots, names_found, values_found = entry
        self.expr_attr_names_found.extend(names_found)
        self.expr_attr_values_found.extend(values_found)
        return bound(tree, {id(slot): AttributeValue(values[name]) for slot, name in slots}, holders)

    wrap(ConditionExpressionParser, "parse")(parse)


def short_paths(app):
    """WSGI middleware: what moto's route would send to DynamoHandler or LambdaResponse goes
    to it directly, with the same normalised request; the rest to ``app``. That is a POST
    to `/` whose target is a hot DynamoDB action and whose signature names DynamoDB (moto's
    models, condition evaluation, errors and serialisation all stay), or a POST to a
    function's `invocations` path signed for Lambda (whose `invoke` lambda_api.py replaces
    with the real runtime). Requests with an `Origin` (browsers) keep moto's route and CORS."""
    from botocore.exceptions import ClientError
    from moto.awslambda.responses import LambdaResponse
    from moto.dynamodb.responses import DynamoHandler
    from moto.moto_api import recorder
    from moto.moto_server.werkzeug_app import BackendRequest  # the request class of moto's own route
    from werkzeug.wrappers import Response

    def short(environ, start_response):
        if environ.get("REQUEST_METHOD") != "POST" or "HTTP_ORIGIN" in environ:
            return app(environ, start_response)
        try:  # the service of the SigV4 credential scope, `Credential=key/date/region/service/aws4_request`
            service = environ["HTTP_AUTHORIZATION"].split(",")[0].split()[1].split("/")[3].lower()
        except (KeyError, IndexError):
            return app(environ, start_response)
        target = environ.get("HTTP_X_AMZ_TARGET")
        invoke = None
        if service == "dynamodb" and target in HOT_DYNAMODB_TARGETS and environ.get("PATH_INFO") == "/":
            handler = DynamoHandler()
            request = _lite_request(environ, recorder) or BackendRequest(environ)
        elif service == "lambda" and (invoke := INVOKE_PATH.match(environ.get("PATH_INFO", ""))):
            handler = LambdaResponse()
            request = _lite_request(environ, recorder, invoke=True) or BackendRequest(environ)
            handler._get_action = lambda: "Invoke"  # what moto's router finds for this path
        else:
            return app(environ, start_response)
        recorder._record_request(request)
        # What moto's dispatch and convert_to_flask_response do around the same call.
        try:
            handler.setup_class(request, request.raw_url, dict(request.headers))
            if invoke:
                handler.uri_match = {"FunctionName": unquote(invoke.group("name"))}  # as the router sets it
            result = handler.call_action()
        except ClientError as exc:
            result = 400, {}, exc.response["Error"]["Message"]
        status, headers, content = result if len(result) == 3 else (200, {}, result)
        response = Response(response=content, status=status, headers=headers)
        # moto's app answers every request with flask-cors' header; so does this path.
        response.headers.setdefault("Access-Control-Allow-Origin", "*")
        return response(environ, start_response)

    return short


def keep_alive_handler():
    """moto's request handler (its header handling kept), serving HTTP/1.1 keep-alive, which
    werkzeug's development server never does: a plain HTTP/1.1 request's line and headers
    are read in one pass, its body whole (by Content-Length), and its buffered answer sent
    with its length in one write. Any other request (HTTP/1.0, a malformed line, folded or
    underscored header names, Transfer-Encoding, Expect) gets the standard library's parser
    and werkzeug's own route, which closes the connection after it."""
    from moto.core.request import PRESERVED_HEADER_NAMES_ENVIRON_KEY
    from moto.moto_server.werkzeug_app import MotoRequestHandler
    from werkzeug.test import run_wsgi_app

    class KeepAliveRequestHandler(MotoRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = KEEP_ALIVE_IDLE_SECONDS
        disable_nagle_algorithm = True  # else Nagle's algorithm meets delayed ACKs: ~40 ms a kept-alive request
        plain: list[tuple[str, str]] | None = None  # a plain request's headers, read in one pass

        def log_request(self, code="-", size="-") -> None:
            """Only server errors. werkzeug writes a line to the log for every request
            (~40 us each, and the bulk of a test run's log); server.py's front door logs
            its refusals itself, and an AWS error is in the answer the client got."""
            if str(code).startswith("5"):
                super().log_request(code, size)

        def log_error(self, format: str, *args) -> None:
            if not format.startswith("Request timed out"):  # an idle kept-alive connection, closed as planned
                super().log_error(format, *args)

        def parse_request(self) -> bool:
            line = self.raw_requestline
            self.plain = None
            parts = line.split()
            if len(parts) != 3 or parts[2] != b"HTTP/1.1" or not line.endswith(b"\r\n"):
                return super().parse_request()
            self.command = parts[0].decode("latin-1")
            self.path = parts[1].decode("latin-1")
            self.request_version = "HTTP/1.1"
            self.requestline = line.decode("latin-1").rstrip("\r\n")
            lines: list[bytes] = []
            while (header := self.rfile.readline(65537)) not in (b"\r\n", b"\n", b""):
                if len(header) > 65536 or len(lines) >= 100:  # http.client's limits
                    self.send_error(431)
                    return False
                lines.append(header)
            fields = [header.decode("latin-1").partition(":") for header in lines]
            if all(
                colon and name and name == name.strip() and "_" not in name and name.lower() not in UNPLAIN_HEADERS
                for name, colon, _ in fields
            ):
                self.plain = [(name, value.strip(" \t\r\n")) for name, _, value in fields]
                self.headers = Headers(self.plain)
            else:  # the standard parser's reading of the same lines
                self.headers = http.client.parse_headers(io.BytesIO(b"".join(lines) + b"\r\n"))
            self.close_connection = self.headers.get("Connection", "").lower() == "close"
            return True

        def make_environ(self) -> dict:
            """For a plain request, the environ werkzeug's make_environ (and moto's) builds for it."""
            path, _, query = self.path.partition("?")
            if self.plain is None or not path.startswith("/") or path.startswith("//"):
                return super().make_environ()
            server = self.server
            address = self.server.server_address
            environ = {
                "wsgi.version": (1, 0),
                "wsgi.url_scheme": "http",
                "wsgi.input": self.rfile,
                "wsgi.run_once": False,
                "wsgi.multithread": server.multithread,
                "wsgi.multiprocess": server.multiprocess,
                "SCRIPT_NAME": "",
                "wsgi.errors": sys.stderr,
                "werkzeug.socket": self.connection,
                "SERVER_SOFTWARE": self.server_version,
                "REQUEST_METHOD": self.command,
                "QUERY_STRING": query,
                "REQUEST_URI": self.path,
                "RAW_URI": self.path,
                "PATH_INFO": unquote(path).encode().decode("latin-1"),  # werkzeug's: its UTF-8 as latin-1 text
                "REMOTE_ADDR": self.client_address[0],
                "REMOTE_PORT": self.client_address[1],
                "SERVER_NAME": address[0],
                "SERVER_PORT": str(address[1]),
                "SERVER_PROTOCOL": "HTTP/1.1",
                PRESERVED_HEADER_NAMES_ENVIRON_KEY: {},  # no underscored names to preserve
            }
            for name, value in self.plain:
                key = name.upper().replace("-", "_")
                if key not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
                    key = "HTTP_" + key
                    value = f"{environ[key]},{value}" if key in environ else value
                environ[key] = value
            return environ

        def run_wsgi(self) -> None:
            if self.plain is None:
                return super().run_wsgi()  # it answers `Connection: close`
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                return self.send_error(400, "invalid Content-Length")
            self.environ = environ = self.make_environ()
            body = self.rfile.read(length) if length > 0 else b""
            if len(body) < length:  # the client went away mid-body
                self.close_connection = True
                return
            environ["wsgi.input"] = io.BytesIO(body)
            try:  # the whole answer, before anything is sent
                chunks, status, headers = run_wsgi_app(self.server.app, environ, buffered=True)
            except Exception as exc:  # as werkzeug: log it, answer 500 (and close)
                print(f"embedded: error on {self.command} {self.path}: {exc!r}", file=sys.stderr, flush=True)
                return self.send_error(500)
            code = int(status[:3])
            payload = b"".join(chunks)
            self.send_response(code, status[4:])
            for name, value in headers:
                self.send_header(name, value)
            bodiless = self.command == "HEAD" or 100 <= code < 200 or code in (204, 304)
            if not bodiless and "content-length" not in headers:
                self.send_header("Content-Length", str(len(payload)))
            if self.close_connection:
                self.send_header("Connection", "close")
            # end_headers(), with the body in the same write
            self._headers_buffer.append(b"\r\n" if bodiless else b"\r\n" + payload)
            self.flush_headers()

    return KeepAliveRequestHandler


class _LiteRequest:
    """The attributes of moto's Request that `BaseResponse.setup_class`, its parameter
    parser and its IAM bookkeeping read, for a request werkzeug would read trivially: a
    POST to `/` with no query string and a JSON content type (DynamoDB), or to a function's
    `invocations` path with no content type or a JSON one (Lambda's Invoke); no content
    encoding, a plain Host other than port 80 (`_lite_request`; any other gets werkzeug's
    Request). werkzeug's form, values and URL parsing cost ~20 % of such a request's CPU
    and find nothing: with no form content type its form is empty and its data the body."""

    from_wsgi_server = True
    content_encoding = None

    def __init__(self, environ: dict, body: bytes):
        from moto.core.request import EnvironHeaders
        from werkzeug.datastructures import CombinedMultiDict, ImmutableMultiDict

        self.environ = environ
        self.method = environ["REQUEST_METHOD"]
        self.headers = EnvironHeaders(environ)
        self.content_type = environ.get("CONTENT_TYPE")
        self.data = body
        self.path = environ.get("PATH_INFO") or "/"
        # As moto's Request reads them: the path as it arrived (RAW_URI, before
        # percent-decoding), and the query string after it.
        self.raw_path = (environ.get("RAW_URI") or self.path).split("?", 1)[0] or "/"
        self.query_string = environ.get("QUERY_STRING", "").encode("latin-1")
        query = f"?{environ['QUERY_STRING']}" if environ.get("QUERY_STRING") else ""
        self.raw_url = f"http://{environ['HTTP_HOST']}{self.raw_path}{query}"
        self.form = self.files = ImmutableMultiDict()
        self.values = CombinedMultiDict([ImmutableMultiDict(), self.form])


def _lite_request(environ: dict, recorder, invoke: bool = False) -> _LiteRequest | None:
    host = environ.get("HTTP_HOST", "")
    content_type = environ.get("CONTENT_TYPE") or None
    if (
        recorder._user_enabled  # it reads the body from the stream itself
        or (environ.get("QUERY_STRING") and not invoke)
        or (content_type not in JSON_CONTENT_TYPES and not (invoke and content_type is None))
        or "HTTP_CONTENT_ENCODING" in environ
        or "HTTP_TRANSFER_ENCODING" in environ
        or not _PLAIN_HOST.match(host)
        or host.endswith(":80")
        or not (environ.get("CONTENT_LENGTH") or "0").isdigit()
        or (environ.get("RAW_URI") or "/").startswith(("http:", "https:", "//"))  # a full URL: werkzeug's parse
    ):
        return None
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length > 0 else b""
    environ["wsgi.input"] = io.BytesIO(body)
    return _LiteRequest(environ, body)
