// Drive `toolhost serve` with clients that speak MCP 2026-07-28 by default, one scenario per run.
//
//     node tests/mcp/modern/client.mjs ts-auto --url http://H:P/mcp --token T   # Streamable HTTP
//     node tests/mcp/modern/client.mjs ts-auto --binary B --config C            # stdio
//     node tests/mcp/modern/client.mjs ai-sdk --url http://H:P/mcp --token T
//
// `ts-auto`: the TypeScript SDK's `@modelcontextprotocol/client` 2.4.0 with
// `versionNegotiation: {mode: 'auto'}`. `ai-sdk`: Vercel's `@ai-sdk/mcp` 2.0.99 in its default
// mode. Each lists the tools, calls `greet`, and calls it with arguments its schema refuses
// (an `isError` result whose failure code is `invalid_arguments`), then prints one JSON line of
// facts (the era negotiated, what was sent) that tests/all/mcp_modern.rs checks. A failed check
// exits 1 with `FAILED <scenario>: <why>` on stderr. Everything is on loopback and bounded.

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { createMCPClient } from '@ai-sdk/mcp';

import { check, runScenario, show } from '../scenario.mjs';

/** Longest a whole scenario may take (the Rust test waits longer). */
const SCENARIO_LIMIT_MS = 120_000;
/** The `_meta` key a failed call's facts travel under. */
const FAILURE_META = 'toolhost/failure';


/** A fetch that records each POST's method and protocol-version header, then sends it. */
function recordingFetch(sent) {
  return async (url, init = {}) => {
    const headers = new Headers(init.headers ?? {});
    if ((init.method ?? 'GET') === 'POST' && typeof init.body === 'string') {
      const body = JSON.parse(init.body);
      sent.push({ method: body.method ?? null, version: headers.get('mcp-protocol-version') });
    }
    return fetch(url, init);
  };
}

/** The failure code of a result, from `_meta` (an `isError` result) or null. */
const failureCode = (r) => r?._meta?.[FAILURE_META]?.code ?? null;

async function tsAuto(args) {
  const client = new Client(
    { name: 'toolhost-modern-test', version: '0' },
    { versionNegotiation: { mode: 'auto' } },
  );
  const sent = [];
  let transport;
  if (args.url) {
    transport = new StreamableHTTPClientTransport(new URL(args.url), {
      requestInit: { headers: { Authorization: `Bearer ${args.token}` } },
      fetch: recordingFetch(sent),
    });
  } else {
    transport = new StdioClientTransport({
      command: args.binary,
      args: ['serve', '--config', args.config],
      stderr: 'ignore',
    });
  }
  await client.connect(transport);
  try {
    const version = client.getNegotiatedProtocolVersion();
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name).sort();
    check(names.includes('greet'), `greet is listed: ${show(names)}`);
    const done = await client.callTool({ name: 'greet', arguments: { name: 'Ada' } });
    check(!done.isError, `greet completes: ${show(done)}`);
    check(done.structuredContent?.result === 'Hello, Ada!', `greet's answer: ${show(done)}`);
    const bad = await client.callTool({ name: 'greet', arguments: { name: 42 } });
    check(bad.isError === true, `a refused call is an isError result: ${show(bad)}`);
    return { version, tools: names, failure: failureCode(bad), sent };
  } finally {
    await client.close();
  }
}

async function aiSdk(args) {
  const sent = [];
  const client = await createMCPClient({
    transport: {
      type: 'http',
      url: args.url,
      headers: { Authorization: `Bearer ${args.token}` },
      fetch: recordingFetch(sent),
    },
  });
  try {
    const tools = await client.tools();
    const names = Object.keys(tools).sort();
    check(names.includes('greet'), `greet is offered: ${show(names)}`);
    const opts = { toolCallId: 'c1', messages: [] };
    const done = await tools.greet.execute({ name: 'Ada' }, opts);
    check(!done.isError, `greet completes: ${show(done)}`);
    check(done.structuredContent?.result === 'Hello, Ada!', `greet's answer: ${show(done)}`);
    const bad = await tools.greet.execute({ name: 42 }, { ...opts, toolCallId: 'c2' });
    check(bad.isError === true, `a refused call is an isError result: ${show(bad)}`);
    return { tools: names, failure: failureCode(bad), sent };
  } finally {
    await client.close();
  }
}

const SCENARIOS = { 'ts-auto': tsAuto, 'ai-sdk': aiSdk };

await runScenario(SCENARIOS, SCENARIO_LIMIT_MS);
