"""MkDocs hook: publish the benchmark chart next to the page that includes the results.

``docs/benchmarks.md`` includes ``bench/results.md``, whose image link ``latency.png`` is
relative to ``bench/``; once included it resolves against the docs root. This hook adds
``bench/latency.png`` to the site at that path, so the link is valid in strict mode and
the chart is shown. Without a chart (results never generated) it adds nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

CHARTS = ("latency.png",)


def on_files(files: Files, config: Any) -> Files:
    bench = Path(config["config_file_path"]).resolve().parent / "bench"
    for name in CHARTS:
        chart = bench / name
        if chart.is_file() and files.get_file_from_path(name) is None:
            files.append(File.generated(config, name, abs_src_path=str(chart)))
    return files
