"""A GPU's UUID whatever its bytes (marker gpu): CuPy hands the 16 bytes over as a C string, so a
UUID with a zero byte arrives cut short; the GPU is then found by its PCI address."""

import subprocess

import pytest

pytestmark = pytest.mark.gpu


def nvidia_smi_uuids() -> list[str]:
    listing = subprocess.run(["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30).stdout
    return [line.strip() for line in listing.splitlines() if line.strip()]


def test_a_cut_short_uuid_is_found_by_the_gpus_pci_address():
    import cupy

    from convlab.backends.cuda import gpu_uuid

    properties = cupy.cuda.runtime.getDeviceProperties(0)
    whole = gpu_uuid(properties)
    assert whole in nvidia_smi_uuids()
    for cut in (b"", bytes(properties["uuid"])[:3]):
        assert gpu_uuid({**properties, "uuid": cut}) == whole
    assert gpu_uuid({"uuid": b""}) == ""  # no PCI address either: nothing to find it by
