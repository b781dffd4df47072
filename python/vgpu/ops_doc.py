"""docs/ops.md, generated from the plugin's op catalog (``vgpu.ops()``): every op the virtual
GPU runs, its dtypes, data formats and notes. ``vgpu ops --markdown > docs/ops.md`` rewrites
the file; tests/python/test_ops_doc.py fails when it is out of date."""
from __future__ import annotations

from typing import Any

_HEADER = """# Ops on the virtual GPU

Generated from the plugin's kernel registry by `vgpu ops --markdown` (do not edit by hand;
`tests/python/test_ops_doc.py` fails when this file is out of date). Every op below has a
kernel registered for the virtual GPU; its numbers are checked against TensorFlow's CPU
kernels in `tests/python/ops/`. *Host memory* names arguments that stay in host memory (shapes,
axes, resource handles). Ops not listed run where TensorFlow's own placement puts them
(host-side bookkeeping, input pipelines).

"""

# The order in which dtypes are listed.
_DTYPE_ORDER = ["float32", "float16", "bfloat16", "float64", "int32", "int64", "uint8", "int8",
                "int16", "uint16", "uint32", "uint64", "complex64", "complex128", "bool", "qint8",
                "resource"]


def _dtype_key(name: str) -> tuple[int, str]:
    return (_DTYPE_ORDER.index(name) if name in _DTYPE_ORDER else len(_DTYPE_ORDER), name)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ") or "–"


def markdown(catalog: list[dict[str, Any]]) -> str:
    """The text of docs/ops.md for `catalog` (the list vgpu.ops() returns)."""
    lines = [_HEADER, f"{len(catalog)} ops.\n", "",
             "| op | dtypes | data formats | host memory | notes |",
             "|---|---|---|---|---|"]
    for entry in sorted(catalog, key=lambda e: e["op"]):
        dtypes = ", ".join(sorted(entry["dtypes"], key=_dtype_key))
        host = ", ".join(entry["host_memory"])
        lines.append(f"| {entry['op']} | {_cell(dtypes)} | {_cell(entry['data_formats'])} | "
                     f"{_cell(host)} | {_cell(entry['notes'])} |")
    return "\n".join(lines) + "\n"


def _plain(catalog: list[dict[str, Any]]) -> str:
    width = max((len(e["op"]) for e in catalog), default=2)
    return "\n".join(
        f"{e['op']:<{width}}  {', '.join(sorted(e['dtypes'], key=_dtype_key))}"
        for e in sorted(catalog, key=lambda e: e["op"])) + "\n"


def render(as_markdown: bool) -> str:
    import vgpu  # noqa: PLC0415 - imports TensorFlow (which loads the plugin)

    catalog = vgpu.ops()
    return markdown(catalog) if as_markdown else _plain(catalog)
