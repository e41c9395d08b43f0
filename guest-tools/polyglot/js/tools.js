// The polyglot example in JavaScript: a record, an option, a result and a list through the
// host's JSON mapping, progress and log; and the hostile functions the host must contain.
import { log, progress } from 'toolhost:tool/host@0.1.1';

export const tools = {
  wordCounts(text, top) {
    const words = text.toLowerCase().split(/\s+/).filter((w) => w.length > 0);
    const counts = new Map();
    words.forEach((word, i) => {
      counts.set(word, (counts.get(word) ?? 0) + 1);
      if (i % 1000 === 999) {
        progress(BigInt(i + 1), BigInt(words.length), 'counting');
      }
    });
    log('info', `${words.length} words, ${counts.size} distinct`);
    return [...counts.entries()]
      .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
      .slice(0, top)
      .map(([word, count]) => ({ word, count }));
  },

  firstWithPrefix(text, prefix) {
    return text.split(/\s+/).find((w) => w.length > 0 && w.startsWith(prefix));
  },

  position(text, word) {
    const words = text.split(/\s+/).filter((w) => w.length > 0);
    if (words.length === 0) {
      throw 'empty-text';
    }
    const at = words.indexOf(word);
    if (at < 0) {
      throw 'not-found';
    }
    return at;
  },
};

export const hostile = {
  spin() {
    let n = 0n;
    for (;;) {
      n += 1n;
    }
  },

  balloon(megabytes) {
    const held = [];
    for (let i = 0; i < megabytes; i++) {
      held.push(new Uint8Array(1 << 20).fill(1));
    }
    return held.length;
  },
};
