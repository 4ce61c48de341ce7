"""Configuration validation and the cell grid."""

import pytest
import yaml

from convlab.paths import DEFAULT_CONFIG
from convlab.plan.config import ConfigError, load_config, validate_config
from convlab.plan.grid import build_cells, gallery_size
from convlab.plan.registry import load_registry


def test_defaults_fill_every_section():
    config = validate_config({})
    assert config["conv2d"]["sizes"] == [128, 256, 512, 1024, 2048, 4096]
    assert config["conv2d"]["strides"] == [1, 2, 3]
    assert config["timing"]["mode"] == "warm"
    assert config["verify"]["tolerance"]["fp32"] == pytest.approx(1e-5)


def test_shipped_config_runs_every_registered_kernel():
    config = load_config(DEFAULT_CONFIG)
    assert config["conv2d"]["kernels"] == "all"
    registry = load_registry()
    assert {c.kernel for c in build_cells(config, "cuda")} == set(registry)
    cpu_kernels = {c.kernel for c in build_cells(config, "cpu")}
    assert cpu_kernels == {name for name, spec in registry.items() if spec.cpu_twin}
    for family in ("conv2d", "tiling", "winograd_layers", "gemm"):
        members = {name for name, spec in registry.items() if family in spec.experiments}
        assert {c.kernel for c in build_cells(config, "cuda") if c.experiment == family} == members


@pytest.mark.parametrize("mode", ["warm", "cold", "graph"])
def test_every_timing_mode_reaches_the_cells(mode):
    cells = build_cells(validate_config({"timing": {"mode": mode}}), "cpu")
    assert {cell.timing["mode"] for cell in cells} == {mode}


@pytest.mark.parametrize("raw,names", [
    ({"timming": {"mode": "warm"}}, "timming"),
    ({"conv2d": {"strides": [0]}}, "conv2d.strides.0"),
    ({"conv2d": {"strides": [-1]}}, "conv2d.strides.0"),
    ({"conv2d": {"sizes": [0]}}, "conv2d.sizes.0"),
    ({"timing": {"mode": "hot"}}, "timing.mode"),
    ({"backend": "opencl"}, "backend"),
])
def test_schema_errors_name_the_key(raw, names):
    with pytest.raises(ConfigError) as error:
        validate_config(raw, source="config/config.yaml")
    assert names in str(error.value)
    assert "config/config.yaml" in str(error.value)


@pytest.mark.parametrize("raw,fragment", [
    ({"conv2d": {"kernels": ["direct", "nope"]}}, "unknown kernel(s) nope"),
    ({"kernels": {"direct": {"blocks": [16]}}}, "kernels.direct.blocks"),
    ({"kernels": {"nope": {}}}, "kernels.nope"),
    ({"conv2d": {"filter_sizes": [4]}}, "even"),
    ({"conv2d": {"filter_sizes": [31], "sizes": [8], "padding": 0}}, "larger than"),
])
def test_grid_errors_name_the_key(raw, fragment):
    with pytest.raises(ConfigError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        build_cells(validate_config(raw), "cuda")


def test_cuda_grid_has_tunables_and_readable_unique_paths():
    cells = build_cells(validate_config({}), "cuda")
    direct = [c for c in cells if c.kernel == "direct" and c.experiment == "conv2d"]
    cudnn = [c for c in cells if c.kernel == "cudnn"]
    assert len(direct) == 6 * 3 * 3  # sizes x strides x blocks 8/16/32
    assert len(cudnn) == 6 * 3 * 2  # sizes x strides x plans
    assert len({c.path for c in cells}) == len(cells)
    assert "results/local/cells/cuda/conv2d/kernel~direct/size~1024/stride~2/filter~3/block~16.csv" in {
        c.path for c in cells}


def test_cpu_grid_has_no_launch_tunables():
    """A block size means nothing to a cpu twin: those combinations are not generated."""
    cells = build_cells(validate_config({}), "cpu")
    assert {c.variant for c in cells} == {"default"}
    assert sorted({c.size for c in cells if c.experiment == "conv2d"}) == [128, 256, 512, 1024]


def test_kernel_override_changes_only_that_kernels_cells():
    base = {c.path: c.to_json() for c in build_cells(validate_config({}), "cuda")}
    changed = {c.path: c.to_json() for c in build_cells(
        validate_config({"kernels": {"cudnn": {"workspace_limit_mb": 64}}}), "cuda")}
    differing = {path for path in base if base[path] != changed[path]}
    assert differing and all("kernel~cudnn/" in path for path in differing)
    assert len(differing) == sum("kernel~cudnn/" in p for p in base)


def test_a_kernel_can_be_limited_to_some_sizes():
    config = validate_config({"kernels": {"direct": {"sizes": [128, 512]}}})
    cells = build_cells(config, "cuda")
    assert {c.size for c in cells if c.kernel == "direct"} == {128, 512}
    assert {c.size for c in cells if c.kernel == "cudnn"} == {128, 256, 512, 1024, 2048, 4096}
    with pytest.raises(ConfigError, match="kernels.direct.sizes"):
        build_cells(validate_config({"kernels": {"direct": {"sizes": 128}}}), "cuda")


def test_gallery_size_falls_back_to_a_size_in_the_grid():
    config = validate_config({"gallery": {"size": 1000}})
    assert gallery_size(config, build_cells(config, "cuda")) == 512
    default = validate_config({})
    assert gallery_size(default, build_cells(default, "cpu")) == 1024


def test_config_file_must_be_a_mapping(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump([1, 2]))
    with pytest.raises(ConfigError, match="mapping"):
        load_config(path)
