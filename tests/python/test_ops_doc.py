"""docs/ops.md is generated from the plugin's op catalog and must be current; the catalog lists
every registered op with its dtypes."""
import pathlib

import vgpu
from vgpu import ops_doc

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "ops.md"


def test_catalog_lists_registered_ops_with_their_dtypes():
    catalog = {entry["op"]: entry for entry in vgpu.ops()}
    assert {"float32", "float16", "bfloat16", "float64"} <= set(catalog["Conv2D"]["dtypes"])
    assert "input_sizes" in catalog["Conv2DBackpropInput"]["host_memory"]
    assert "float32" in catalog["AssignAddVariableOp"]["dtypes"]  # C++ API registrations too
    assert "resource" in catalog["AssignAddVariableOp"]["host_memory"]


def test_docs_ops_md_is_generated_from_the_catalog():
    expected = ops_doc.markdown(vgpu.ops())
    assert DOC.exists(), "docs/ops.md is missing: run `vgpu ops --markdown > docs/ops.md`"
    assert DOC.read_text() == expected, (
        "docs/ops.md is out of date: run `vgpu ops --markdown > docs/ops.md`")
