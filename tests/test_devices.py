"""Several device labels in one run (config `devices`): the labels and where their jobs go, the
refusals (each one line), what the cluster's nodes offer, and the DAG a two-label run builds."""

from __future__ import annotations

import subprocess
import sys

import pytest
from workflow_helpers import REPO, TINY

from convlab.backends import choice
from convlab.plan.config import ConfigError, validate_config
from convlab.plan.devicelabel import Placement, choose_devices, unplaceable
from convlab.snakefile import clusternodes


def devices(value) -> tuple[list[Placement], str]:
    return choose_devices(validate_config({"backend": "cpu", "devices": value}), "cpu", [])


def test_a_list_of_labels_makes_each_label_its_own_gpu_model():
    placements, line = devices(["h100", "h200"])
    assert placements == [Placement("h100", gpu_model="h100"), Placement("h200", gpu_model="h200")]
    assert line == ("results under results/h100/, results/h200/ (config devices: h100 on gpu_model h100; "
                    "h200 on gpu_model h200)")


def test_the_command_line_gives_the_mapping_as_text():
    assert devices("{a: {constraint: x}, b: {constraint: y}}")[0] == [Placement("a", constraint="x"),
                                                                      Placement("b", constraint="y")]
    assert devices("[h100]")[0] == [Placement("h100", gpu_model="h100")]


def test_without_devices_the_one_label_is_device():
    placements, line = choose_devices(validate_config({"backend": "cpu", "device": "lab"}), "cpu", [])
    assert placements == [Placement("lab")] and line == "results under results/lab/ (config device)"


@pytest.mark.parametrize("config, problem", [
    ({"device": "lab", "devices": ["h100"]}, "config sets both device and devices"),
    ({"devices": {"a": {"gpu_model": "h100"}, "b": {"constraint": "h200"}}},
     "config devices: every label must name the same keys"),
])
def test_refusals_are_one_line(config, problem):
    with pytest.raises(ConfigError, match=problem) as raised:
        choose_devices(validate_config({"backend": "cpu", **config}), "cpu", [])
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("value, key", [({"Bad": {"gpu_model": "x"}}, "devices"), ({"a": {}}, "devices.a"),
                                        ({"a": {"gpu": "x"}}, "devices.a"), ([], "devices")])
def test_the_schema_names_the_key(value, key):
    with pytest.raises(ConfigError, match=f"config: {key}: "):
        validate_config({"devices": value})


def test_a_label_no_node_can_run_is_named():
    placements = [Placement("h100", gpu_model="h100"), Placement("h300", gpu_model="h300")]
    assert unplaceable(placements, {"h100", "h200"}, set()) == (
        "device h300: no Slurm node has a GPU of model h300 (the nodes offer h100, h200); fix config devices")
    assert unplaceable([Placement("a", constraint="h100&ib")], set(), {"h100"}) == (
        "device a: no Slurm node has the feature ib (the nodes offer h100); fix config devices")
    assert unplaceable(placements[:1], {"h100"}, set()) is None


def test_node_offers_reads_sinfo(monkeypatch):
    listing = "gpu:h100:4(S:0-1)|h100,ib\ngpu:h200:8|(null)\n(null)|cpuonly\n"
    monkeypatch.setattr(clusternodes.shutil, "which", lambda name: "/usr/bin/sinfo")
    monkeypatch.setattr(clusternodes.subprocess, "run",
                        lambda *a, **k: subprocess.CompletedProcess(a, 0, stdout=listing, stderr=""))
    assert clusternodes.node_offers() == ({"h100", "h200"}, {"h100", "ib", "cpuonly"})
    monkeypatch.setattr(clusternodes.shutil, "which", lambda name: None)
    assert clusternodes.node_offers() is None


def dry_run(*config: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile", TINY, "--config", *config],
                          cwd=REPO, capture_output=True, text=True, timeout=300)


def test_two_labels_make_one_grid_per_label_with_its_own_placement():
    result = dry_run("devices={lab-a: {constraint: fa}, lab-b: {constraint: fb}}")
    assert result.returncode == 0, result.stderr[-3000:]
    one = dry_run("device=lab-a")
    assert one.returncode == 0, one.stderr[-3000:]

    def cells(text: str, label: str) -> int:
        return text.count(f"output: results/{label}/cells/")

    text = result.stdout + result.stderr
    assert cells(text, "lab-a") == cells(text, "lab-b") == cells(one.stdout + one.stderr, "lab-a") > 30
    # every job of a label that runs on a node asks for that label's feature
    lines = text.splitlines()
    asked = {}  # label -> the constraints its jobs' resources name
    for at, wildcards in enumerate(lines):
        # a job's block: its wildcards, then (after its priority, where it has one) its resources
        resources = next((line for line in lines[at + 1:at + 3] if "resources:" in line), None)
        if "wildcards: device=" in wildcards and resources is not None:
            label = wildcards.split("device=")[1].split(",")[0].strip()
            asked.setdefault(label, []).append(resources.split("constraint=")[1].split(",")[0]
                                               if "constraint=" in resources else None)
    # the cells, the bandwidth, the ceiling and the gallery of each label ask for its feature;
    # the local jobs (summary, figures) for none
    for label, feature in (("lab-a", "fa"), ("lab-b", "fb")):
        assert set(asked[label]) == {feature, None}
        assert asked[label].count(feature) >= cells(text, label) + 2
    assert "results under results/lab-a/, results/lab-b/" in text
    assert "results/gpus.html" in text


def test_both_device_and_devices_stop_the_run_with_one_line():
    result = dry_run("device=lab", "devices=[h100]")
    assert result.returncode != 0
    errors = [line for line in (result.stdout + result.stderr).splitlines() if line.startswith("error:")]
    assert errors == ["error: config sets both device and devices: keep devices (several labels) or device (one)"]
    assert "Traceback" not in result.stdout + result.stderr


SAME = [("NVIDIA H200", "GPU-aaa1"), ("NVIDIA H200", "GPU-bbb2")]
MIXED = [("NVIDIA A100", "GPU-aaa1"), ("NVIDIA H100", "GPU-bbb2")]


@pytest.mark.parametrize("listed, setting, bus_order, seen", [
    (SAME, None, False, ["NVIDIA H200", "NVIDIA H200"]),
    (SAME, "", False, []),
    (SAME, "1", False, ["NVIDIA H200"]),
    (SAME, "GPU-bbb", False, ["NVIDIA H200"]),
    (SAME, "0,7,1", False, ["NVIDIA H200"]),  # CUDA stops at the first entry it cannot resolve
    (SAME, "0,0", False, ["NVIDIA H200"]),
    (SAME, "7", False, []),
    (SAME, "MIG-4d2c", False, ["NVIDIA H200"]),
    (MIXED, "GPU-bbb", False, ["NVIDIA H100"]),
    (MIXED, "1", True, ["NVIDIA H100"]),
    (MIXED, "1", False, ["NVIDIA A100", "NVIDIA H100"]),  # CUDA's fastest-first order: not known here
    (MIXED, "GPU-", False, []),  # not one GPU's UUID
])
def test_the_visible_gpus_are_the_drivers_list_narrowed_as_cuda_reads_cuda_visible_devices(
        listed, setting, bus_order, seen):
    assert choice.visible(listed, setting, bus_order) == seen


def test_one_model_of_a_mixed_host_chosen_by_uuid_is_that_models_label(monkeypatch):
    listing = [(f"0000:0{i}:00.0", {"Model": model, "GPU UUID": uuid}) for i, (model, uuid) in enumerate(MIXED)]
    monkeypatch.setattr(choice, "driver_gpus", lambda: listing)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    config = validate_config({"backend": "cuda"})
    with pytest.raises(ConfigError, match="UUIDs of the GPUs of one model"):
        choose_devices(config, "cuda", choice.visible_gpu_names())
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-bbb2")
    assert choice.visible_gpu_names() == ["NVIDIA H100"]
    assert choose_devices(config, "cuda", choice.visible_gpu_names())[0] == [Placement("h100")]
