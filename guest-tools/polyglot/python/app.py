"""The polyglot example in Python: a record, an option, a result and a list through the
host's JSON mapping, progress and log; and the hostile functions the host must contain."""

from typing import List, Optional

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports import tools
from wit_world.imports import host


class Tools(exports.Tools):
    def word_counts(self, text: str, top: int) -> List[tools.WordCount]:
        words = text.lower().split()
        counts: dict = {}
        for i, word in enumerate(words):
            counts[word] = counts.get(word, 0) + 1
            if i % 1000 == 999:
                host.progress(i + 1, len(words), "counting")
        host.log(host.Level.INFO, f"{len(words)} words, {len(counts)} distinct")
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
        return [tools.WordCount(word=w, count=c) for w, c in ranked]

    def first_with_prefix(self, text: str, prefix: str) -> Optional[str]:
        return next((w for w in text.split() if w.startswith(prefix)), None)

    def position(self, text: str, word: str) -> int:
        words = text.split()
        if not words:
            raise Err(tools.LookupError.EMPTY_TEXT)
        if word not in words:
            raise Err(tools.LookupError.NOT_FOUND)
        return words.index(word)


class Hostile(exports.Hostile):
    def spin(self) -> int:
        n = 0
        while True:
            n += 1

    def balloon(self, megabytes: int) -> int:
        held = []
        for _ in range(megabytes):
            held.append(bytearray(1 << 20))
        return len(held)
