// The {{name}} tool component: each function of the exported `tools` object is a tool.
import { log } from 'toolhost:tool/host@0.1.0';

export const tools = {
  greet(name) {
    log('info', 'greeting');
    return `Hello, ${name}!`;
  },
};
