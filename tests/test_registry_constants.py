"""A description's `constants`: a buffer name, or a buffer filled only where a condition holds."""

import pytest

from convlab.paths import KERNELS_DIR
from convlab.plan.registry import ConstantFill, RegistryError, load_registry

DESCRIPTION = f"""name: const_probe
source: {KERNELS_DIR / "direct_const.cu"}
layout: {{input: chw, weights: oihw, output: chw}}
tunables:
  block: [8]
defines:
  IN_REGISTERS: "1 - min(1, OH * OW // 1025)"
constants:
  {{constants}}
stages:
  - name: conv
    function: conv2d_direct_const_chw
    block: [block, block]
    grid: ["cdiv(OW, block)", "cdiv(OH, block)"]
    args: [input, output, H, W, stride, pad, OH, OW]
"""


def probe(tmp_path, constants: str):
    (tmp_path / "registry.yaml").write_text("kernels:\n  const_probe: const_probe.yaml\n")
    (tmp_path / "const_probe.yaml").write_text(DESCRIPTION.replace("{constants}", constants))
    return load_registry(tmp_path)["const_probe"]


def test_a_buffer_name_is_filled_at_every_launch(tmp_path):
    fill = probe(tmp_path, "c_weights: weights").constants["c_weights"]
    assert fill == ConstantFill("weights")
    assert fill.applies({"IN_REGISTERS": 1}) and fill.applies({"IN_REGISTERS": 0})


def test_a_condition_fills_the_symbol_only_where_it_holds(tmp_path):
    fill = probe(tmp_path, 'c_weights: {buffer: weights, when: "IN_REGISTERS == 0"}').constants["c_weights"]
    assert fill == ConstantFill("weights", "IN_REGISTERS == 0")
    assert fill.applies({"IN_REGISTERS": 0}) and not fill.applies({"IN_REGISTERS": 1})


@pytest.mark.parametrize("entry", ['c_weights: {buffer: weights, if: "K > 1"}', "c_weights: {when: K > 1}",
                                   "c_weights: [weights]", "c_weights: {buffer: weights, when: 3}"])
def test_a_malformed_entry_is_refused_in_one_line_naming_the_symbol(tmp_path, entry):
    with pytest.raises(RegistryError, match=r"constants\.c_weights must be a buffer name or") as raised:
        probe(tmp_path, entry)
    assert "\n" not in str(raised.value)
