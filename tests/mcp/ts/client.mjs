// Drive `toolhost serve` with the official TypeScript MCP SDK, one scenario per run.
//
//     node tests/mcp/ts/client.mjs SCENARIO --binary B --config C       # stdio
//     node tests/mcp/ts/client.mjs SCENARIO --url http://H:P/mcp --token T  # Streamable HTTP
//
// Each scenario checks what it claims and exits 1 with `FAILED <scenario>: <why>` on stderr at
// the first failed check; on success it prints one JSON line of facts the Rust test
// (tests/all/mcp_ts.rs) checks further. Everything is on loopback; every wait is bounded.
//
// The TypeScript SDK differs from the Python one where it matters here: once `listTools()` has
// run, `callTool` checks every result's `structuredContent` against the tool's `outputSchema`,
// `isError` or not, and throws -32602 when it does not match. So a failure must never carry
// structuredContent; its `{status, code, message, call_id}` travel in `_meta["toolhost/failure"]`
// and its first text line says `status="STATUS (CODE)"`.

import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { Failure, check, runScenario, show } from '../scenario.mjs';

/** Longest a whole scenario may take before the client gives up (the Rust test waits longer). */
const SCENARIO_LIMIT_MS = 120_000;
/** Longest any one request may take (the fixture's longest deadline is 30 s). */
const REQUEST_TIMEOUT_MS = 60_000;
/** The `_meta` key a failed call's facts travel under. */
const FAILURE_META = 'toolhost/failure';


/**
 * The (tool, code) pairs of every hostile fixture that ends in a failure: HOSTILE_FAILURES in
 * the Python client, read from there so the two clients always cover the same fixtures.
 */
function hostileFailures() {
  const here = dirname(fileURLToPath(import.meta.url));
  const py = readFileSync(join(here, '..', 'client.py'), 'utf8');
  const block = py.match(/^HOSTILE_FAILURES = \[\n([\s\S]*?)^\]/m);
  check(block, 'HOSTILE_FAILURES not found in tests/mcp/client.py');
  const pairs = [...block[1].matchAll(/\(\s*"([a-z_]+)"\s*,\s*"([a-z_]+)"\s*\)/g)].map((m) => [m[1], m[2]]);
  const entries = block[1].split('\n').filter((l) => l.trim().startsWith('(')).length;
  check(pairs.length > 0 && pairs.length === entries,
    `HOSTILE_FAILURES in tests/mcp/client.py: parsed ${pairs.length} of ${entries} entries`);
  return pairs;
}

/** An initialized client over the chosen transport (end it with `disconnect`). */
async function connect(args) {
  const client = new Client({ name: 'toolhost-ts-test', version: '0' });
  let transport;
  if (args.url) {
    const headers = args.token ? { Authorization: `Bearer ${args.token}` } : {};
    transport = new StreamableHTTPClientTransport(new URL(args.url), { requestInit: { headers } });
  } else {
    check(args.binary && args.config, 'stdio needs --binary and --config');
    // The server's stderr (its session announcement) goes to ours, for the Rust test to read.
    transport = new StdioClientTransport({
      command: args.binary,
      args: ['serve', '--config', args.config],
      stderr: 'inherit',
    });
  }
  await client.connect(transport, { timeout: REQUEST_TIMEOUT_MS });
  check(client.getServerVersion()?.name === 'toolhost', `server info ${show(client.getServerVersion())}`);
  return client;
}

/** End the session: DELETE over HTTP, stdin closed (then the SDK's bounded kill) over stdio. */
async function disconnect(client) {
  const transport = client.transport;
  if (transport instanceof StreamableHTTPClientTransport) {
    await transport.terminateSession();
  }
  await client.close();
}

/** One tools/call; a thrown error (a protocol error, or the SDK's own check) fails the check. */
async function call(client, name, args, what, options = {}) {
  try {
    return await client.callTool({ name, arguments: args }, undefined, { timeout: REQUEST_TIMEOUT_MS, ...options });
  } catch (e) {
    throw new Failure(`${what}: tools/call threw instead of returning a result: ${e?.code ?? ''} ${e?.message ?? e}`);
  }
}

function firstText(result) {
  const block = (result.content ?? [])[0];
  return block?.type === 'text' ? block.text : '';
}

/** A completed call: not isError, labelled untrusted text, and its structured content. */
function expectOk(result, what) {
  check(result.isError !== true, `${what}: expected success, got ${show(result)}`);
  check(firstText(result).includes('trust="untrusted"'), `${what}: text not labelled untrusted: ${show(result)}`);
  check(result.structuredContent && typeof result.structuredContent === 'object',
    `${what}: no structuredContent: ${show(result)}`);
  return result.structuredContent;
}

/**
 * A failed call: isError, no structuredContent, `_meta["toolhost/failure"]` with this code and
 * status `failed`, and the first text line saying `status="failed (CODE)"`.
 */
function expectFailure(result, code, what) {
  check(result.isError === true, `${what}: expected isError, got ${show(result)}`);
  check(result.structuredContent === undefined, `${what}: a failure carries structuredContent: ${show(result)}`);
  const f = result._meta?.[FAILURE_META];
  check(f && typeof f === 'object', `${what}: no _meta["${FAILURE_META}"]: ${show(result)}`);
  check(f.code === code, `${what}: expected code ${code}, got ${show(f)}`);
  check(f.status === 'failed', `${what}: status ${show(f)}`);
  check(typeof f.call_id === 'string' && f.call_id.startsWith('rpc-'), `${what}: call_id ${show(f)}`);
  check(typeof f.message === 'string' && f.message.length > 0
    && !['/work/', '/tmp/', '/root/', '.rs:'].some((p) => f.message.includes(p)), `${what}: message ${show(f)}`);
  check(!('approval' in f), `${what}: approval on a ${code} failure: ${show(f)}`);
  const line = firstText(result).split('\n', 1)[0];
  check(line.includes(`status="failed (${code})"`), `${what}: first text line does not say failed (${code}): ${line}`);
  return f;
}

async function greetWorks(client, name, what) {
  const got = expectOk(await call(client, 'greet', { name }, what), what);
  check(show(got) === show({ result: `Hello, ${name}!` }), `${what}: ${show(got)}`);
}

/** List tools first (arming the SDK's output-schema check), then successes and every failure. */
async function scenarioTools(args) {
  const client = await connect(args);
  try {
    const listed = await client.listTools(undefined, { timeout: REQUEST_TIMEOUT_MS });
    const tools = new Map(listed.tools.map((t) => [t.name, t]));
    const hostile = hostileFailures();
    for (const name of ['greet', 'convert_length', 'read_text', 'sleep_forever', ...hostile.map(([t]) => t)]) {
      check(tools.has(name), `${name} is not listed: ${show([...tools.keys()])}`);
      check(tools.get(name).outputSchema?.type === 'object', `${name} output schema ${show(tools.get(name).outputSchema)}`);
    }

    // Successes, their structured content checked against the outputSchema by the SDK.
    await greetWorks(client, 'Ada', 'greet');
    const converted = expectOk(await call(client, 'convert_length',
      { value: 1.5, from: 'kilometre', to: 'metre' }, 'convert_length'), 'convert_length');
    check(show(converted) === show({ result: 1500 }), `convert_length: ${show(converted)}`);

    // Every failure the fixture config produces: a result with isError, never a thrown error.
    const failures = [
      ['greet', { name: 5 }, 'invalid_arguments', 'wrong type'],
      ['greet', {}, 'invalid_arguments', 'missing argument'],
      ['greet', { name: 'a', extra: 1 }, 'invalid_arguments', 'extra argument'],
      ['no_such_tool', {}, 'unknown_tool', 'unknown tool'],
      ['read_text', { path: '../../etc/passwd' }, 'tool_error', 'path escape'],
      ...hostile.map(([tool, code]) => [tool, {}, code, tool]),
    ];
    const codes = {};
    for (const [tool, toolArgs, code, what] of failures) {
      expectFailure(await call(client, tool, toolArgs, what), code, what);
      await greetWorks(client, 'after', `greet after ${what}`);
      codes[code] = (codes[code] ?? 0) + 1;
    }
    await greetWorks(client, 'last', 'greet at the end');
    return { tools: tools.size, failures: failures.length, codes };
  } finally {
    await disconnect(client);
  }
}

/** An AbortSignal cancels a call of a guest that never returns; the session serves on. */
async function scenarioCancel(args) {
  const client = await connect(args);
  try {
    await client.listTools(undefined, { timeout: REQUEST_TIMEOUT_MS });
    const controller = new AbortController();
    const started = Date.now();
    const pending = client
      .callTool({ name: 'sleep_forever', arguments: {} }, undefined, { timeout: REQUEST_TIMEOUT_MS, signal: controller.signal })
      .then((r) => ({ returned: r }), (e) => ({ threw: e }));
    const early = await Promise.race([pending, new Promise((r) => setTimeout(() => r(null), 1_000))]);
    check(early === null, `sleep_forever ended before it was cancelled: ${show(early?.returned ?? String(early?.threw))}`);
    const abortedAt = Date.now();
    controller.abort(new Error('cancelled by the test'));
    const settled = await pending;
    const abortMs = Date.now() - abortedAt;
    check(settled.threw, `the aborted call returned a result: ${show(settled.returned)}`);
    check(String(settled.threw.message).includes('cancelled by the test'), `the abort surfaced as ${settled.threw.message}`);
    check(abortMs < 1_000, `the abort took ${abortMs} ms to reach the caller`);
    const greetStarted = Date.now();
    await greetWorks(client, 'after', 'greet after cancel');
    return { abort_ms: abortMs, next_call_ms: Date.now() - greetStarted, elapsed_ms: Date.now() - started };
  } finally {
    await disconnect(client);
  }
}

const SCENARIOS = { tools: scenarioTools, cancel: scenarioCancel };

await runScenario(SCENARIOS, SCENARIO_LIMIT_MS);
