"""The cell: one kernel on one problem with one launch configuration, and its result path.
The grid of cells is built in convlab.plan.grid; each experiment family names its problems
(convlab.plan.families)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any

from convlab.measure.row import spec_hash, variant_name
from convlab.plan.families import family

# One readable path per cell, Paramspace style; also the cell rule's output pattern. Under the
# device label (results/<device>/, see convlab.plan.devicelabel), so that GPUs never mix. The
# problem part depends on the experiment: size~4096/stride~1/filter~3 for image convolutions,
# layer~C64_H224_W224_K64/batch~8 for CNN layers, size~4096 for GEMM.
CELL_PATH = "results/{device}/cells/{backend}/{experiment}/kernel~{kernel}/{problem}/{variant}.csv"
LOG_PATH = "results/{device}/logs/cells/{backend}/{experiment}/kernel~{kernel}/{problem}/{variant}.log"
# The label of cells built outside a pipeline run (python -m convlab run).
UNLABELLED = "local"


@dataclass(frozen=True)
class Cell:
    """One measurement: one kernel on one problem with one launch configuration."""

    experiment: str
    backend: str
    kernel: str
    size: int
    stride: int
    filter_size: int
    padding: int
    in_channels: int
    out_channels: int
    filter: str
    tunables: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    timing: dict[str, Any] = field(default_factory=dict)
    verify: dict[str, Any] = field(default_factory=dict)
    batch: int = 1
    width: int = 0  # 0: square (width = size)
    image: str = ""  # the data file the cell reads, if any
    device: str = UNLABELLED  # the label its results are kept under

    @property
    def problem(self) -> str:
        """The problem as a path fragment, as its experiment family names it."""
        return family(self.experiment).path_fragment(self)

    @property
    def variant(self) -> str:
        """The tunables as a path component, e.g. 'block~16', or 'default'."""
        return variant_name(self.tunables)

    @property
    def path(self) -> str:
        return CELL_PATH.format(device=self.device, backend=self.backend, experiment=self.experiment, kernel=self.kernel,
                                problem=self.problem, variant=self.variant)

    def to_json(self) -> str:
        # fields() rather than asdict(): the same JSON without asdict's deep copies, which cost a
        # second of every DAG build over the default grid
        return json.dumps({f.name: getattr(self, f.name) for f in fields(self)}, sort_keys=True)

    @property
    def spec_hash(self) -> str:
        """The hash of its settings that its row records (the row's ``spec_hash``)."""
        return spec_hash(self.to_json())

    @classmethod
    def from_json(cls, text: str) -> Cell:
        return cls(**json.loads(text))
