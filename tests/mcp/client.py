"""Drive `toolhost serve` with the official MCP Python SDK, one scenario per run.

    python tests/mcp/client.py SCENARIO --binary B --config C            # stdio
    python tests/mcp/client.py SCENARIO --url http://H:P/mcp --token T   # Streamable HTTP

Each scenario asserts what it checks and exits non-zero with a message on the first failure;
on success it prints one JSON object (facts the Rust test checks further, e.g. in the ledger).
Everything it contacts is on loopback; every wait is bounded.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import warnings
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio
import httpx2
import mcp_types as types
from pydantic import ConfigDict, Field
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.extension import ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client

PROTOCOL = "2025-11-25"

# (tool, expected code) for every hostile fixture that ends in a failure.
HOSTILE_FAILURES = [
    ("spin", "fuel_exhausted"),
    ("spin_deadline", "deadline_exceeded"),
    ("balloon", "memory_exceeded"),
    ("flood_stdout", "output_too_large"),
    ("huge_result", "output_too_large"),
    ("deep_recursion", "guest_trap"),
    ("panic", "guest_trap"),
    ("write_readonly", "tool_error"),
]


class Failure(Exception):
    pass


def check(cond: bool, what: str) -> None:
    if not cond:
        raise Failure(what)


@asynccontextmanager
async def connect(args: argparse.Namespace, **session_kwargs: Any):
    """An initialized ClientSession over the chosen transport."""
    if args.url:
        headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
        async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as http:
            async with streamable_http_client(args.url, http_client=http) as (read, write):
                async with ClientSession(read, write, **session_kwargs) as session:
                    init = await session.initialize()
                    yield session, init
    else:
        params = StdioServerParameters(command=args.binary, args=["serve", "--config", args.config])
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, **session_kwargs) as session:
                init = await session.initialize()
                yield session, init


def structured(result: types.CallToolResult) -> Any:
    return result.structured_content


def expect_error(result: types.CallToolResult, code: str, what: str) -> dict:
    """A failure: isError, no structuredContent, the code under _meta and in the text."""
    check(result.is_error is True, f"{what}: expected isError, got {result}")
    check(result.structured_content is None, f"{what}: a failure carries structuredContent: {result}")
    sc = (result.meta or {}).get("toolhost/failure") or {}
    text = result.content[0].text if result.content else ""
    check(f"({code})" in text.split("\n", 1)[0], f"{what}: the text does not carry {code}: {text}")
    check(sc.get("code") == code, f"{what}: expected code {code}, got {sc}")
    check(sc.get("status") in ("failed", "cancelled", "outcome_unknown"), f"{what}: status {sc}")
    message = sc.get("message")
    check(isinstance(message, str) and not any(p in message for p in ("/work/", "/tmp/", "/root/", ".rs:")),
          f"{what}: message {sc}")
    return sc


def expect_ok(result: types.CallToolResult, what: str) -> Any:
    check(result.is_error is not True, f"{what}: expected success, got {result}")
    text = result.content[0].text if result.content else ""
    check('trust="untrusted"' in text, f"{what}: text rendering is not labelled untrusted: {text}")
    return structured(result)


async def scenario_tools(args: argparse.Namespace) -> dict:
    """List tools, call every example tool, invalid and unknown calls, every hostile fixture."""
    async with connect(args) as (s, init):
        check(init.protocol_version == PROTOCOL, f"negotiated {init.protocol_version}")
        first = await s.list_tools()
        second = await s.list_tools()
        dump = lambda r: [t.model_dump(mode="json") for t in r.tools]
        check(dump(first) == dump(second), "tools/list differs between two calls")
        tools = {t.name: t for t in first.tools}
        for name in ["greet", "convert_length", "sha256", "json_pointer", "read_text", "list_dir",
                     "write_text", "http_get", "spin", "log_spam", "forge_stdout"]:
            check(name in tools, f"{name} is not listed: {sorted(tools)}")
        for t in first.tools:
            check(bool(t.description), f"{t.name} has no description")
            check(t.input_schema.get("type") == "object", f"{t.name} input schema {t.input_schema}")
            check(t.output_schema and t.output_schema.get("type") == "object",
                  f"{t.name} output schema {t.output_schema}")
            check(t.annotations is not None, f"{t.name} has no annotations")
        a = tools["greet"].annotations
        check(a.read_only_hint is True and a.destructive_hint is False, f"greet annotations {a}")
        check(tools["write_text"].annotations.read_only_hint is False, "write_text is not read-only")
        check(tools["http_get"].annotations.open_world_hint is True, "http_get is open-world")

        # Every example tool, with its structured content checked against the outputSchema by
        # the SDK itself (it validates every non-error result).
        got = expect_ok(await s.call_tool("greet", {"name": "Ada"}), "greet")
        check(got == {"result": "Hello, Ada!"}, f"greet: {got}")
        got = expect_ok(await s.call_tool("convert_length",
                                          {"value": 1.5, "from": "kilometre", "to": "metre"}), "convert")
        check(got == {"result": 1500.0}, f"convert_length: {got}")
        got = expect_ok(await s.call_tool("sha256", {"text": "abc"}), "sha256")
        check(got["result"].startswith("ba7816bf"), f"sha256: {got}")
        got = expect_ok(await s.call_tool("json_pointer",
                                          {"document": '{"a":[1,2]}', "pointer": "/a/1"}), "pointer")
        check(got == {"result": "2"}, f"json_pointer: {got}")
        got = expect_ok(await s.call_tool("list_dir", {"path": "."}), "list_dir")
        check(isinstance(got["result"], list), f"list_dir: {got}")
        got = expect_ok(await s.call_tool("read_text", {"path": "hello.txt"}), "read_text")
        check(got == {"result": "hello from the workspace\n"}, f"read_text: {got}")
        if args.http_port:
            got = expect_ok(await s.call_tool("http_get", {"url": f"http://127.0.0.1:{args.http_port}/"}),
                            "http_get")
            check(got["status"] == 200 and got["body"] == "hello from loopback", f"http_get: {got}")

        # Failures are tool results, never protocol errors.
        expect_error(await s.call_tool("greet", {"name": 5}), "invalid_arguments", "wrong type")
        expect_error(await s.call_tool("greet", {}), "invalid_arguments", "missing argument")
        expect_error(await s.call_tool("greet", {"name": "a", "extra": 1}), "invalid_arguments", "extra")
        expect_error(await s.call_tool("no_such_tool", {}), "unknown_tool", "unknown tool")
        expect_error(await s.call_tool("read_text", {"path": "../../etc/passwd"}), "tool_error", "escape")

        for tool, code in HOSTILE_FAILURES:
            expect_error(await s.call_tool(tool, {}), code, tool)
            got = expect_ok(await s.call_tool("greet", {"name": "after"}), f"after {tool}")
            check(got == {"result": "Hello, after!"}, f"after {tool}: {got}")

        # Forged JSON-RPC on guest stdout: the real result arrives, nothing forged does.
        got = expect_ok(await s.call_tool("forge_stdout", {}), "forge_stdout")
        check(isinstance(got["result"], int) and got["result"] > 1000, f"forge_stdout: {got}")
        for i in range(5):
            got = expect_ok(await s.call_tool("greet", {"name": f"n{i}"}), "after forge")
            check(got == {"result": f"Hello, n{i}!"}, f"after forge: {got}")
        return {"tools": len(tools)}


async def scenario_progress(args: argparse.Namespace) -> dict:
    """Guest progress becomes bounded, increasing, content-free notifications."""
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with connect(args) as (s, _):
        got = expect_ok(await s.call_tool("log_spam", {}, progress_callback=on_progress), "log_spam")
        check(got == {"result": 200000}, f"log_spam: {got}")
        # Without a token, no progress is sent (and the call still completes).
        expect_ok(await s.call_tool("log_spam", {}), "log_spam without token")
    check(len(seen) >= 1, "no progress notification arrived")
    check(len(seen) <= 200, f"{len(seen)} notifications: not bounded")
    values = [p for p, _, _ in seen]
    check(all(b > a for a, b in zip(values, values[1:])), f"progress not increasing: {values}")
    check(all(m is None for _, _, m in seen), f"a guest message reached the client: {seen[:3]}")
    check(all(t == 100000 for _, t, _ in seen), f"totals: {seen[:3]}")
    return {"notifications": len(seen)}


async def scenario_cancel(args: argparse.Namespace) -> dict:
    """notifications/cancelled stops the running guest long before its deadline."""
    async with connect(args) as (s, _):
        started = time.monotonic()
        with anyio.move_on_after(1.0):
            await s.call_tool("sleep_forever", {})
            raise Failure("sleep_forever returned before it was cancelled")
        # The host still serves, at once.
        got = expect_ok(await s.call_tool("greet", {"name": "after"}), "after cancel")
        check(got == {"result": "Hello, after!"}, f"after cancel: {got}")
        return {"elapsed_ms": int((time.monotonic() - started) * 1000)}


async def scenario_concurrency(args: argparse.Namespace) -> dict:
    """Two calls that hang until their deadline stall nothing else on the session."""
    done: dict[str, float] = {}
    results: dict[str, types.CallToolResult] = {}
    async with connect(args) as (s, _):
        t0 = time.monotonic()

        async def hang(key: str) -> None:
            results[key] = await s.call_tool("spin_deadline", {})
            done[key] = time.monotonic() - t0

        async with anyio.create_task_group() as tg:
            tg.start_soon(hang, "a")
            tg.start_soon(hang, "b")
            await anyio.sleep(0.3)
            listed = await s.list_tools()
            check(len(listed.tools) > 0, "tools/list while hanging")
            got = expect_ok(await s.call_tool("greet", {"name": "busy"}), "greet while hanging")
            check(got == {"result": "Hello, busy!"}, f"greet while hanging: {got}")
            done["normal"] = time.monotonic() - t0
            check(not done.get("a") and not done.get("b"), f"the hanging calls ended early: {done}")
    for key in ("a", "b"):
        expect_error(results[key], "deadline_exceeded", f"hanging call {key}")
    check(done["normal"] < min(done["a"], done["b"]), f"normal call was stalled: {done}")
    return {k: int(v * 1000) for k, v in done.items()}


def elicitation(answer: str, asked: list[str]):
    async def callback(context, params):
        asked.append(params.message)
        if answer == "accept":
            return types.ElicitResult(action="accept", content={"approve": True})
        return types.ElicitResult(action=answer)

    return callback


async def scenario_approve(args: argparse.Namespace) -> dict:
    """A call needing approval asks the human: accept runs it once, decline refuses it,
    and a client without elicitation gets approval_required with the handle."""
    asked: list[str] = []
    async with connect(args, elicitation_callback=elicitation("accept", asked)) as (s, _):
        got = expect_ok(await s.call_tool("write_text", {"path": "approved.txt", "content": "yes"}),
                        "accepted write")
        check(got == {"created": True, "bytes-written": 3}, f"accepted write: {got}")
    check(len(asked) == 1, f"asked {len(asked)} times")
    check("write_text" in asked[0] and '"content": "yes"' in asked[0]
          and '"path": "approved.txt"' in asked[0] and "risk: write" in asked[0],
          f"the question does not show the exact call: {asked[0]}")

    declined: list[str] = []
    async with connect(args, elicitation_callback=elicitation("decline", declined)) as (s, _):
        expect_error(await s.call_tool("write_text", {"path": "declined.txt", "content": "no"}),
                     "approval_denied", "declined write")
    check(len(declined) == 1, "the decline was not asked")

    async with connect(args) as (s, _):
        sc = expect_error(await s.call_tool("write_text", {"path": "later.txt", "content": "?"}),
                          "approval_required", "no elicitation")
        check("handle" in sc.get("approval", {}), f"no approval handle: {sc}")
        # The operator approves out of band; the same call resubmitted with the token runs once.
        minted = subprocess.run(
            [args.binary, "approve", "--config", args.config, "--yes",
             "--arguments", json.dumps({"path": "later.txt", "content": "?"}),
             sc["approval"]["handle"]],
            capture_output=True, text=True, timeout=60)
        check(minted.returncode == 0, f"toolhost approve failed: {minted.stderr}")
        token = minted.stdout.strip()
        meta = {"toolhost/approvalToken": token}
        got = expect_ok(await s.call_tool("write_text", {"path": "later.txt", "content": "?"},
                                          meta=meta), "approved resubmission")
        check(got == {"created": True, "bytes-written": 1}, f"approved resubmission: {got}")
        again = await s.call_tool("write_text", {"path": "later.txt", "content": "?"}, meta=meta)
        expect_error(again, "approval_reused", "reused token")
    return {"handle": sc["approval"]["handle"]}


async def scenario_auth(args: argparse.Namespace) -> dict:
    """HTTP: no token or a wrong one is 401 before MCP; a foreign Host or Origin is 403."""
    init = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": PROTOCOL, "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "0"}},
    }
    base = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    statuses = {}
    async with httpx2.AsyncClient(timeout=10) as http:
        for label, extra in [
            ("no_token", {}),
            ("wrong_token", {"Authorization": "Bearer not-the-token"}),
            ("bad_scheme", {"Authorization": f"Basic {args.token}"}),
            ("foreign_host", {"Authorization": f"Bearer {args.token}", "Host": "evil.example"}),
            ("foreign_origin", {"Authorization": f"Bearer {args.token}",
                                "Origin": "http://evil.example"}),
        ]:
            r = await http.post(args.url, headers=base | extra, content=json.dumps(init))
            statuses[label] = r.status_code
            check("jsonrpc" not in r.text, f"{label}: MCP answered: {r.text[:200]}")
    check(statuses["no_token"] == 401 and statuses["wrong_token"] == 401
          and statuses["bad_scheme"] == 401, f"unauthenticated statuses {statuses}")
    check(statuses["foreign_host"] == 403 and statuses["foreign_origin"] == 403,
          f"rebinding statuses {statuses}")
    async with connect(args) as (s, _):
        got = expect_ok(await s.call_tool("greet", {"name": "token"}), "authenticated call")
        check(got == {"result": "Hello, token!"}, f"authenticated call: {got}")
    return statuses


async def scenario_session_end(args: argparse.Namespace) -> dict:
    """HTTP: deleting a session cancels its running call (raw requests, so nothing else does)."""
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "Authorization": f"Bearer {args.token}"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": PROTOCOL, "capabilities": {},
                       "clientInfo": {"name": "raw", "version": "0"}}}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "sleep_forever", "arguments": {}}}
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=60)) as http:
        r = await http.post(args.url, headers=headers, content=json.dumps(init))
        check(r.status_code == 200, f"initialize: {r.status_code} {r.text[:200]}")
        sid = r.headers.get("mcp-session-id")
        check(bool(sid), f"no session id: {dict(r.headers)}")
        session = headers | {"Mcp-Session-Id": sid, "MCP-Protocol-Version": PROTOCOL}
        r = await http.post(args.url, headers=session,
                            content=json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        check(r.status_code in (200, 202), f"initialized: {r.status_code}")
        async def long_call() -> None:
            try:
                await http.post(args.url, headers=session, content=json.dumps(call))
            except httpx2.HTTPError:
                pass  # the stream may close without a result: the session is gone

        started = time.monotonic()
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(long_call)
                await anyio.sleep(1.0)
                r = await http.delete(args.url, headers=session)
                check(r.status_code in (200, 204), f"DELETE: {r.status_code} {r.text[:200]}")
        return {"elapsed_ms": int((time.monotonic() - started) * 1000)}


async def scenario_polyglot(args: argparse.Namespace) -> dict:
    """A Python or JavaScript tool: described from its WIT, typed results, progress and log
    lines, and its hostile functions contained with the exact codes while the server serves on."""
    seen: list[float] = []
    logged: list[Any] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logged.append(params.data)

    async with connect(args, logging_callback=on_log) as (s, _):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await s.set_logging_level("info")
        tools = {t.name: t for t in (await s.list_tools()).tools}
        names = {"word_counts", "first_with_prefix", "position", "spin", "balloon"}
        check(set(tools) == names, f"tools: {sorted(tools)}")
        check(
            (tools["word_counts"].description or "").startswith("Count the words of `text`"),
            f"description: {tools['word_counts'].description}",
        )
        text = " ".join(["b a c a"] * 750)
        got = expect_ok(
            await s.call_tool("word_counts", {"text": text, "top": 2}, progress_callback=on_progress),
            "word_counts",
        )
        want = [{"word": "a", "count": 1500}, {"word": "b", "count": 750}]
        check(got == {"result": want}, f"word_counts: {got}")
        got = expect_ok(await s.call_tool("first_with_prefix", {"text": "apple banana", "prefix": "ba"}), "some")
        check(got == {"result": "banana"}, f"first_with_prefix: {got}")
        got = expect_ok(await s.call_tool("first_with_prefix", {"text": "apple", "prefix": "x"}), "none")
        check(got == {"result": None}, f"first_with_prefix: {got}")
        got = expect_ok(await s.call_tool("position", {"text": "a b c", "word": "c"}), "position")
        check(got == {"result": 2}, f"position: {got}")
        expect_error(await s.call_tool("position", {"text": "a b", "word": "z"}), "tool_error", "not found")
        expect_error(await s.call_tool("spin", {}), "fuel_exhausted", "spin")
        expect_error(await s.call_tool("balloon", {"megabytes": 512}), "memory_exceeded", "balloon")
        got = expect_ok(await s.call_tool("position", {"text": "a b c", "word": "a"}), "after hostile")
        check(got == {"result": 0}, f"after hostile: {got}")
    check(len(seen) >= 1, "no progress notification arrived")
    messages = [d.get("message") for d in logged if isinstance(d, dict) and d.get("tool") == "word_counts"]
    check("3000 words, 3 distinct" in messages, f"the guest's log line did not arrive: {logged}")
    return {"progress": len(seen), "logged": len(logged)}


@asynccontextmanager
async def connect_modern(args: argparse.Namespace, **client_kwargs: Any):
    """The SDK's high-level Client in its default mode: it probes `server/discover` and, when the
    server offers 2026-07-28, speaks it (no initialize, no session)."""
    from mcp import Client

    if args.url:
        headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
        async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as http:
            async with Client(streamable_http_client(args.url, http_client=http), **client_kwargs) as c:
                yield c
    else:
        params = StdioServerParameters(command=args.binary, args=["serve", "--config", args.config])
        async with Client(params, **client_kwargs) as c:
            yield c


async def scenario_modern(args: argparse.Namespace) -> dict:
    """The SDK's 2026-07-28 client: the version it chose, the tools, a call and its resend by
    run and call id (the recorded result), a failure with its code, and approvals through
    input_required, which the SDK answers with the elicitation callback and retries: accept
    runs the call once, decline refuses it."""
    asked: list[str] = []
    async with connect_modern(args, elicitation_callback=elicitation("accept", asked)) as c:
        check(c.protocol_version == "2026-07-28", f"negotiated {c.protocol_version}")
        names = {t.name for t in (await c.list_tools()).tools}
        check({"greet", "write_text"} <= names, f"tools: {sorted(names)}")
        meta = {"toolhost/run": "sdk-2026", "toolhost/callId": "g1"}
        first = expect_ok(await c.call_tool("greet", {"name": "modern"}, meta=meta), "greet")
        check(first == {"result": "Hello, modern!"}, f"greet: {first}")
        again = expect_ok(await c.call_tool("greet", {"name": "modern"}, meta=meta), "resend")
        check(again == first, f"the resend is not the recorded result: {again}")
        expect_error(await c.call_tool("greet", {"name": 5}), "invalid_arguments", "bad arguments")
        got = expect_ok(await c.call_tool("write_text", {"path": "modern.txt", "content": "2026"}),
                        "accepted write")
        check(got == {"created": True, "bytes-written": 4}, f"accepted write: {got}")
    check(len(asked) == 1, f"asked {len(asked)} times")
    check("write_text" in asked[0] and '"content": "2026"' in asked[0]
          and '"path": "modern.txt"' in asked[0] and "risk: write" in asked[0],
          f"the question does not show the exact call: {asked[0]}")
    declined: list[str] = []
    async with connect_modern(args, elicitation_callback=elicitation("decline", declined)) as c:
        expect_error(await c.call_tool("write_text", {"path": "declined-modern.txt", "content": "no"}),
                     "approval_denied", "declined write")
    check(len(declined) == 1, "the decline was not asked")
    return {"asked": len(asked), "protocol": "2026-07-28"}


class _TaskHandle(types.Result):
    """A `tools/call` answered with a task (`resultType: "task"`, the tasks extension)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str = Field(alias="taskId")
    status: str


class _Loose(types.Result):
    """A result read as it came (a 2026-07-28 task, which the SDK does not model)."""

    model_config = ConfigDict(extra="allow")


class _UpdateTaskParams(types.RequestParams):
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    task_id: str = Field(alias="taskId")
    input_responses: dict = Field(alias="inputResponses")


class _UpdateTask(types.Request[_UpdateTaskParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: _UpdateTaskParams


class TasksExtension(ClientExtension):
    """The tasks extension (`io.modelcontextprotocol/tasks`) on the SDK's own extension
    interface, as an SDK user writes it: a `task` result is polled with `tasks/get` until it
    ends; an approval question is answered (`approve`) with `tasks/update`; with `cancel`, the
    task is cancelled with `tasks/cancel` once it runs. The SDK sends `Mcp-Name` on none of these."""

    identifier = "io.modelcontextprotocol/tasks"

    def __init__(self, approve: bool, cancel: bool) -> None:
        self.approve = approve
        self.cancel = cancel
        self.statuses: list[str] = []
        self.questions: list[str] = []

    def claims(self):
        return [ResultClaim(result_type="task", model=_TaskHandle, resolve=self.resolve)]

    async def get(self, session, task_id: str) -> dict:
        got = await session.send_request(
            types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id)), _Loose)
        return got.model_dump(by_alias=True)

    async def resolve(self, handle: _TaskHandle, ctx) -> types.CallToolResult:
        task_id = handle.task_id
        for _ in range(600):
            got = await self.get(ctx.session, task_id)
            status = got.get("status")
            if not self.statuses or self.statuses[-1] != status:
                self.statuses.append(status)
            if status == "completed":
                return types.CallToolResult.model_validate(got["result"])
            if status in ("failed", "cancelled"):
                failure = (got.get("error") or {}).get("data", {}).get("toolhost/failure", {})
                return types.CallToolResult(content=[], is_error=True,
                                            _meta={"toolhost/failure": failure})
            if status == "input_required":
                (key, asked), = got["inputRequests"].items()
                self.questions.append(json.dumps(asked))
                answer = {"action": "accept", "content": {"approve": self.approve}}
                await ctx.session.send_request(_UpdateTask(params=_UpdateTaskParams(
                    task_id=task_id, input_responses={key: answer})), _Loose)
            if status == "working" and self.cancel:
                await ctx.session.send_request(types.CancelTaskRequest(
                    params=types.CancelTaskRequestParams(task_id=task_id)), _Loose)
            await anyio.sleep(0.1)
        raise Failure(f"task {task_id} did not end: {self.statuses}")


async def scenario_tasks(args: argparse.Namespace) -> dict:
    """The SDK's 2026-07-28 client over HTTP with the tasks extension (built on its extension
    interface): a task polled to its result; a write task that waits for approval, answered yes
    through `tasks/update`, runs once; one answered no ends `approval_denied`; a long task
    cancelled through `tasks/cancel` ends failed `cancelled_after_start` (a write that had
    started)."""
    facts: dict = {}
    for what, approve, cancel, tool, arguments in [
        ("polled", True, False, "slow_compute", {"seconds": 1, "label": "sdk"}),
        ("approved", True, False, "confirm_delete", {"filename": "yes.txt"}),
        ("denied", False, False, "confirm_delete", {"filename": "no.txt"}),
        ("cancelled", True, True, "slow_compute", {"seconds": 120, "label": "long"}),
    ]:
        tasks = TasksExtension(approve, cancel)
        async with connect_modern(args, extensions=[tasks]) as c:
            check(c.protocol_version == "2026-07-28", f"negotiated {c.protocol_version}")
            result = await c.call_tool(tool, arguments)
        failure = (result.meta or {}).get("toolhost/failure", {}) if result.is_error else {}
        facts[what] = {"statuses": tasks.statuses, "questions": len(tasks.questions),
                       "output": result.structured_content, "code": failure.get("code")}
    return facts


async def scenario_oauth(args: argparse.Namespace) -> dict:
    """An OAuth access token (--token) through both of the SDK's clients: `whoami` answers the
    token's principal and tenant; a refused token (--bad-token) gets 401 and a challenge that
    names the metadata document, which names the issuer."""
    nothing = {"principal": None, "tenant": None, "run-id": None, "call-id": None,
               "idempotency-key": None}
    seen = {}
    async with connect(args) as (s, _):
        seen["2025"] = expect_ok(await s.call_tool("whoami", nothing), "whoami (2025-11-25)")
    async with connect_modern(args) as c:
        check(c.protocol_version == "2026-07-28", f"negotiated {c.protocol_version}")
        seen["2026"] = expect_ok(await c.call_tool("whoami", nothing), "whoami (2026-07-28)")
    for era, ctx in seen.items():
        check((ctx["principal"], ctx["tenant"]) == ("oauth:alice", "acme"), f"{era}: {ctx}")
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": PROTOCOL, "capabilities": {},
                       "clientInfo": {"name": "raw", "version": "0"}}}
    base = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with httpx2.AsyncClient(timeout=10) as http:
        r = await http.post(args.url, headers=base | {"Authorization": f"Bearer {args.bad_token}"},
                            content=json.dumps(init))
        challenge = r.headers.get("www-authenticate", "")
        check(r.status_code == 401 and 'error="invalid_token"' in challenge
              and "resource_metadata=" in challenge, f"refused token: {r.status_code} {challenge}")
        metadata = (await http.get(args.url.replace("/mcp", "/.well-known/oauth-protected-resource"))).json()
    return {"principal": seen["2026"]["principal"], "issuer": metadata["authorization_servers"][0]}


SCENARIOS = {
    "modern": scenario_modern,
    "tasks": scenario_tasks,
    "oauth": scenario_oauth,
    "polyglot": scenario_polyglot,
    "session_end": scenario_session_end,
    "tools": scenario_tools,
    "progress": scenario_progress,
    "cancel": scenario_cancel,
    "concurrency": scenario_concurrency,
    "approve": scenario_approve,
    "auth": scenario_auth,
}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("scenario", choices=sorted(SCENARIOS))
    p.add_argument("--binary")
    p.add_argument("--config")
    p.add_argument("--url")
    p.add_argument("--token")
    p.add_argument("--bad-token")
    p.add_argument("--http-port", type=int)
    args = p.parse_args()
    try:
        facts = anyio.run(lambda: bounded(SCENARIOS[args.scenario], args))
    except Failure as f:
        print(f"FAILED {args.scenario}: {f}", file=sys.stderr)
        return 1
    print(json.dumps(facts))
    return 0


async def bounded(fn, args):
    with anyio.fail_after(120):
        return await fn(args)


if __name__ == "__main__":
    sys.exit(main())
