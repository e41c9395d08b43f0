// The {{name}} tool component: each function of the exported `tools` object is a tool.
import { context, log } from 'toolhost:tool/host@0.1.1';

export const tools = {
  greet(name) {
    // Who called and which call this is, from the host (never from the arguments). A tool that
    // changes something elsewhere sends ctx.idempotencyKey with its request (e.g. an
    // Idempotency-Key header), so that a retry of this call cannot do it twice.
    const ctx = context();
    log('info', `greeting for ${ctx.principal} (key ${ctx.idempotencyKey})`);
    return `Hello, ${name}!`;
  },
};
