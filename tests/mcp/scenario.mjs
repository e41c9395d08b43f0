// What the Node clients of the MCP tests share (tests/mcp/ts, tests/mcp/modern): a failed
// check, and the harness that runs one scenario by name and prints its facts.
//
//     node client.mjs SCENARIO (--binary B --config C | --url U [--token T])
//
// A scenario prints one JSON line of facts on success; at its first failed check it exits 1
// with `FAILED <scenario>: <why>` on stderr. Every scenario is bounded by `limitMs`.

import { parseArgs } from 'node:util';

/** A check that did not hold. */
export class Failure extends Error {}

/** Throw a `Failure` saying `what` unless `cond`. */
export function check(cond, what) {
  if (!cond) throw new Failure(what);
}

export const show = (v) => JSON.stringify(v);

/** Run the scenario the command line names, from `scenarios`, within `limitMs`. */
export async function runScenario(scenarios, limitMs) {
  const { values: args, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      binary: { type: 'string' },
      config: { type: 'string' },
      url: { type: 'string' },
      token: { type: 'string' },
    },
  });
  const scenario = positionals[0];
  if (positionals.length !== 1 || !(scenario in scenarios)) {
    console.error(`usage: client.mjs {${Object.keys(scenarios).join('|')}} (--binary B --config C | --url U [--token T])`);
    process.exit(2);
  }
  const limit = setTimeout(() => {
    console.error(`FAILED ${scenario}: not done within ${limitMs} ms`);
    process.exit(1);
  }, limitMs);
  try {
    const facts = await scenarios[scenario](args);
    console.log(JSON.stringify(facts));
  } catch (e) {
    const why = e instanceof Failure ? e.message : `unexpected ${e?.stack ?? e}`;
    console.error(`FAILED ${scenario}: ${why}`);
    process.exitCode = 1;
  } finally {
    clearTimeout(limit);
  }
  // Nothing of a closed session may keep the process alive past its answer.
  setTimeout(() => process.exit(process.exitCode ?? 0), 2_000).unref();
}
