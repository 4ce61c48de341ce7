"""The report's intro (workflow/report/workflow.rst) is true for the run it introduces: it names the backend, the
device and each experiment family that ran, and on the cpu backend it never claims CUDA-event timings or a GPU.

The cpu side is the real `snakemake --report` of the tiny cpu config in a temporary copy; the cuda side, which
needs a GPU to run, renders the same file the way Snakemake's report does (Jinja2, then docutils)."""

import html
import json
import re
from pathlib import Path

import pytest
import yaml
from workflow_helpers import copy_finished_run, snakemake

from convlab.measure.hostinfo import cpu_name
from convlab.plan.config import validate_config

REPO = Path(__file__).resolve().parents[1]
FAMILIES = ("conv2d", "tiling", "winograd_layers", "gemm")
# What only a GPU run may say of its timings and floor.
GPU_CLAIMS = re.compile(r"CUDA[- ]event|this machine's GPU|on the same GPU|device-to-device", re.IGNORECASE)


def intro_text(report: Path) -> str:
    """The intro as a reader sees it, on one line: the report keeps it as one JavaScript string of HTML."""
    found = re.search(r'var workflow_desc = (".*?");\n', report.read_text())
    assert found, "the report has no workflow description"
    return plain(json.loads(found.group(1)))


def plain(body: str) -> str:
    """HTML as the words a reader sees, whitespace collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())


def _report(repo: Path, configfile: str) -> str:
    snakemake(repo, 2, configfile=configfile)
    snakemake(repo, 1, "--report", "results/report.html", configfile=configfile)
    return intro_text(repo / "results/report.html")


@pytest.fixture(scope="module")
def repo(tiny_report: Path, tmp_path_factory) -> Path:
    """A copy of the session's tiny run and its report, with a config of two families beside it."""
    repo = copy_finished_run(tiny_report, tmp_path_factory.mktemp("intro") / "repo")
    config = yaml.safe_load((repo / "config/tiny-cpu.yaml").read_text())
    config["backend"] = "auto"  # resolved when the DAG is built: the intro must say what it resolved to
    config["tiling"]["enabled"] = config["winograd_layers"]["enabled"] = False
    (repo / "config/two-families.yaml").write_text(yaml.safe_dump(config))
    return repo


@pytest.fixture(scope="module")
def cpu_intro(tiny_report: Path) -> str:
    """The intro of the report of the tiny cpu config's run."""
    return intro_text(tiny_report / "results/report.html")


@pytest.mark.pipeline
def test_cpu_intro_names_backend_device_and_every_family(cpu_intro):
    assert "re-run on the cpu backend" in cpu_intro
    assert cpu_name() in cpu_intro
    assert "families: conv2d, tiling, winograd_layers, gemm." in cpu_intro
    for family in FAMILIES:
        assert f" {family} (" in cpu_intro, family


@pytest.mark.pipeline
def test_cpu_intro_claims_no_cuda_timing(cpu_intro):
    assert not GPU_CLAIMS.search(cpu_intro), GPU_CLAIMS.search(cpu_intro)
    # what the cpu backend times instead, as convlab/backends/cpu.py does
    assert "host wall-clock" in cpu_intro and "time.perf_counter()" in cpu_intro
    assert "NumPy/OpenCV twin" in cpu_intro
    assert "System Message" not in cpu_intro  # the rst rendered without docutils warnings


@pytest.mark.pipeline
def test_intro_names_only_the_families_that_ran(repo, cpu_intro):
    # after the full run, so that the two runs' reports do not overwrite each other's before it is read
    intro = _report(repo, "config/two-families.yaml")
    assert "re-run on the cpu backend (backend auto in the config)" in intro
    assert "measured 2 experiment families: conv2d, gemm." in intro
    assert " tiling (" not in intro and " winograd_layers (" not in intro


# ---- the cuda branch, rendered as Snakemake renders it


def _render(config: dict) -> str:
    from docutils.core import publish_parts
    from jinja2 import Environment

    class Snakemake:  # what the report passes the workflow description
        pass

    Snakemake.config = config
    # the environment snakemake.report builds for the workflow description
    env = Environment(trim_blocks=True, lstrip_blocks=True)
    text = env.from_string((REPO / "workflow/report/workflow.rst").read_text()).render(snakemake=Snakemake)
    return plain(publish_parts(text, writer="html", settings_overrides={"report_level": 2})["html_body"])


def _config(backend: str, families: tuple[str, ...]) -> dict:
    config = validate_config(yaml.safe_load((REPO / "config/config.yaml").read_text()))
    config["report_intro"] = {
        "backend": backend, "requested": "auto", "device": "NVIDIA H200" if backend == "cuda" else "Test CPU",
        "label": "h200", "folders": "``results/h200/``", "family_names": list(families),
        "families": [{"name": name, "label": name, "seeds": "", "kernels": "k", "cells": 1} for name in families],
    }
    return config


def test_cuda_intro_says_cuda_events_and_names_the_gpu():
    intro = _render(_config("cuda", FAMILIES))
    assert "re-run on the cuda backend (backend auto in the config) on NVIDIA H200" in intro
    assert "its results are under results/h200/" in intro
    assert "CUDA-event timings" in intro
    assert "measured 4 experiment families: conv2d, tiling, winograd_layers, gemm." in intro
    assert "System Message" not in intro


def test_cpu_branch_never_says_cuda_events_whatever_the_families():
    for families in (FAMILIES, ("gemm",)):
        intro = _render(_config("cpu", families))
        assert not GPU_CLAIMS.search(intro)
        assert "host wall-clock" in intro
    assert "measured 1 experiment family: gemm." in intro
    assert " conv2d (" not in intro
