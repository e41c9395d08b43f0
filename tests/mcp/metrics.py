"""Scrape a toolhost /metrics endpoint and parse it with the official Prometheus Python client's
OpenMetrics parser (tests/all/metrics.rs drives it). Prints one JSON object: the response's
content type and every sample as {name, labels, value}. A text the parser refuses fails."""

import json
import sys
import urllib.request

from prometheus_client.openmetrics.parser import text_string_to_metric_families


def main() -> None:
    url = sys.argv[1]
    with urllib.request.urlopen(url, timeout=30) as response:
        content_type = response.headers.get("Content-Type", "")
        text = response.read().decode("utf-8")
    samples = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples.append({"name": s.name, "labels": dict(s.labels), "value": s.value})
    print(json.dumps({"content_type": content_type, "samples": samples}))


if __name__ == "__main__":
    main()
